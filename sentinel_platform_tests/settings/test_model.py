"""The composed model: one ``Settings`` whose fields come part by part in one order, and
whose rules across parts are checked in one order.

The field order is what ``docs/settings.md`` and the per-field errors follow; the rules'
order decides which one a start with several broken rules reports.
"""

from __future__ import annotations

import pytest
from pydantic_settings import BaseSettings

from sentinel_platform.settings import Settings, SettingsError, load_settings
from sentinel_platform.settings.alerting import AlertingSettings
from sentinel_platform.settings.analyzer import AnalyzerSettings
from sentinel_platform.settings.backpressure import BackpressureSettings
from sentinel_platform.settings.batch import BatchSettings
from sentinel_platform.settings.connection import ConnectionSettings
from sentinel_platform.settings.dagster import DagsterSettings
from sentinel_platform.settings.delivery import DeliverySettings
from sentinel_platform.settings.lanes import LaneSettings
from sentinel_platform.settings.retention import RetentionSettings
from sentinel_platform.settings.streams import StreamSettings

#: The parts in the order their fields appear in the reference.
PARTS = (
    ConnectionSettings,
    StreamSettings,
    DeliverySettings,
    RetentionSettings,
    BackpressureSettings,
    AnalyzerSettings,
    LaneSettings,
    BatchSettings,
    AlertingSettings,
    DagsterSettings,
)


def test_the_fields_are_the_parts_fields_part_by_part() -> None:
    from_parts = [name for part in PARTS for name in part.model_fields]
    assert list(Settings.model_fields) == from_parts
    assert len(set(from_parts)) == len(from_parts), "a field is declared by two parts"
    assert from_parts[0] == "redis_url" and from_parts[-1] == "dagster_max_concurrent_runs"


def test_the_parts_are_listed_last_to_first_before_base_settings() -> None:
    """Pydantic collects fields from the most basic class up: the last part listed first."""
    assert Settings.__bases__ == (*reversed(PARTS), BaseSettings)


RETENTION = {"SENTINEL_IDEMPOTENCY_TTL_S": "60", "SENTINEL_STREAM_RETENTION_INTERVAL_S": "120"}
LAG = {"SENTINEL_LAG_WARN_S": "20"}
HANG = {"SENTINEL_HANG_TIMEOUT_MS": "2000", "SENTINEL_LEASE_TTL_MS": "3000"}
MODEL_API = {"SENTINEL_ANALYZER_API": "openai"}


@pytest.mark.parametrize(
    ("broken", "reported"),
    [
        ({**RETENTION, **LAG}, "SENTINEL_STREAM_RETENTION_INTERVAL_S (120) must be at most"),
        ({**LAG, **HANG}, "SENTINEL_LAG_WARN_S (20.0) must be below"),
        ({**HANG, **MODEL_API}, "SENTINEL_HANG_TIMEOUT_MS (2000) must be above"),
        ({**RETENTION, **MODEL_API}, "SENTINEL_STREAM_RETENTION_INTERVAL_S (120) must be at"),
        (MODEL_API, "SENTINEL_ANALYZER_API=openai needs SENTINEL_ANALYZER_URL"),
    ],
)
def test_of_several_broken_rules_across_parts_the_same_one_is_reported(
    monkeypatch: pytest.MonkeyPatch, broken: dict[str, str], reported: str
) -> None:
    for name, value in broken.items():
        monkeypatch.setenv(name, value)
    with pytest.raises(SettingsError) as error:
        load_settings()
    assert reported in str(error.value)
    assert str(error.value).count("\n") == 1, "one rule across parts is reported at a time"
