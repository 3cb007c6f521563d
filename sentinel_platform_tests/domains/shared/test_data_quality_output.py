"""Great-expectations' own progress bars must stay out of the run logs.

GX draws a tqdm bar per validation on stderr; in a Dagster run those partial-line
redraws end up in the captured step logs as noise. The check validates a real Spark
DataFrame and watches the process's real stderr.
"""

from __future__ import annotations

from typing import Any

import pytest

from sentinel_platform.domains.axioms.checks import AXIOM_SUITE
from sentinel_platform.domains.shared.data_quality import validate
from sentinel_platform.domains.shared.landing import CORRUPT

pytestmark = pytest.mark.spark


def test_validation_draws_no_progress_bar_on_stderr(
    spark: Any, capfd: pytest.CaptureFixture[str]
) -> None:
    rows = [("sensor-1", "2024-05-01T12:00:00+00:00", 1.5, 0.1, "nominal", None)]
    schema = (
        "source_id string, emitted_at string, metric_value double, anomaly_score double, "
        f"status string, {CORRUPT} string"
    )
    df = AXIOM_SUITE.view(spark.createDataFrame(rows, schema))
    capfd.readouterr()
    outcomes = validate(df, "axioms", AXIOM_SUITE.expectations())
    err = capfd.readouterr().err
    assert outcomes, "the suite ran no expectation"
    assert "Calculating Metrics" not in err
    assert "it/s]" not in err
