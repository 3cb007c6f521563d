"""The blocking data-quality check on the day's axioms, before they publish."""

from __future__ import annotations

from typing import Any

from sentinel_platform.domains.axioms.assets import axioms
from sentinel_platform.domains.shared.data_quality import QualitySuite, quality_check
from sentinel_platform.registry import AXIOMS
from sentinel_platform.schemas import STATUSES


def axiom_rules(e: Any) -> list[Any]:
    """Non-null unique (source_id, emitted_at), scores in [0,1], known statuses."""
    return [
        e.ExpectColumnValuesToNotBeNull(column="source_id"),
        e.ExpectCompoundColumnsToBeUnique(column_list=["source_id", "emitted_at"]),
        e.ExpectColumnValuesToNotBeNull(column="metric_value"),
        e.ExpectColumnValuesToNotBeNull(column="anomaly_score"),
        e.ExpectColumnValuesToBeBetween(column="anomaly_score", min_value=0, max_value=1),
        e.ExpectColumnValuesToBeInSet(column="status", value_set=list(STATUSES)),
    ]


AXIOM_SUITE = QualitySuite(
    columns=("source_id", "emitted_at", "metric_value", "anomaly_score", "status"),
    time_column="emitted_at",
    rules=axiom_rules,
)

axioms_quality = quality_check(
    AXIOMS,
    axioms,
    AXIOM_SUITE,
    "Non-null unique (source_id, emitted_at), scores in [0,1], known statuses, ISO times.",
)
