"""The blocking data-quality check on the day's axioms, before they publish."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame

from sentinel_platform.domains.axioms.assets import axioms
from sentinel_platform.domains.shared.data_quality import (
    ISO_8601,
    quality_check,
    timestamp_unparseable,
)
from sentinel_platform.domains.shared.landing import CORRUPT
from sentinel_platform.schemas import STATUSES


def axiom_expectations() -> list[Any]:
    """Non-null unique (source_id, emitted_at), scores in [0,1], known statuses, ISO times."""
    import great_expectations as gx

    e = gx.expectations
    return [
        e.ExpectColumnValuesToNotBeNull(column="source_id"),
        e.ExpectCompoundColumnsToBeUnique(column_list=["source_id", "emitted_at"]),
        e.ExpectColumnValuesToNotBeNull(column="metric_value"),
        e.ExpectColumnValuesToNotBeNull(column="anomaly_score"),
        e.ExpectColumnValuesToBeBetween(column="anomaly_score", min_value=0, max_value=1),
        e.ExpectColumnValuesToBeInSet(column="status", value_set=list(STATUSES)),
        e.ExpectColumnValuesToMatchRegex(column="emitted_at", regex=ISO_8601),
        e.ExpectColumnValuesToBeNull(column="timestamp_unparseable"),
        e.ExpectColumnValuesToBeNull(column=CORRUPT),
    ]


def axiom_view(df: DataFrame) -> DataFrame:
    """The columns GX checks, with unparseable ``emitted_at`` values in a helper column."""
    return df.select(
        "source_id",
        "emitted_at",
        "metric_value",
        "anomaly_score",
        "status",
        CORRUPT,
        timestamp_unparseable("emitted_at"),
    )


axioms_quality = quality_check(
    axioms,
    "axioms_quality",
    "axioms",
    axiom_view,
    axiom_expectations,
    "Non-null unique (source_id, emitted_at), scores in [0,1], known statuses, ISO times.",
)
