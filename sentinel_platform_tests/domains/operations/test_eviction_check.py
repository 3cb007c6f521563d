"""The stream-health check on the server's eviction policy: passes on ``noeviction``, fails
with WARN on ``volatile-*`` (or an accepted ``allkeys-*``), with ERROR on ``allkeys-*``, and
passes with a note when the server hides the policy."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import dagster as dg
import pytest

from sentinel_platform.domains.operations.stream_health import (
    EVICTION_CHECK,
    build_checks_schedule,
    build_stream_health_checks,
)
from sentinel_platform.domains.operations.targets import TRANSACTIONS
from sentinel_platform.resources.alerts import AlertSink
from sentinel_platform.resources.settings import SettingsResource
from sentinel_platform.resources.stream_inspector import StreamInspector
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform_tests.harness.operations import transaction_stream

PASS, WARN, ERROR = "pass", dg.AssetCheckSeverity.WARN, dg.AssetCheckSeverity.ERROR


def run_eviction_check(instance: dg.DagsterInstance, resources: dict[str, Any]) -> Any:
    """Execute a checks job of the eviction check alone, for real; its evaluation."""
    checks = [
        check
        for check in build_stream_health_checks([TRANSACTIONS])
        if {key.name for key in check.check_keys} == {EVICTION_CHECK}
    ]
    assert len(checks) == 1
    schedule = build_checks_schedule(checks, name="eviction_only")
    defs = dg.Definitions(
        assets=[transaction_stream], asset_checks=checks, schedules=[schedule], resources=resources
    )
    result = defs.resolve_job_def(schedule.job_name).execute_in_process(instance=instance)
    (evaluation,) = result.get_asset_check_evaluations()
    return evaluation


def _verdict(evaluation: Any) -> Any:
    return PASS if evaluation.passed else evaluation.severity


def _metadata(evaluation: Any) -> dict[str, Any]:
    return {k: v.value for k, v in evaluation.metadata.items()}


@pytest.mark.parametrize(
    ("policy", "extra", "expected", "level"),
    [
        ("noeviction", {}, PASS, "ok"),
        ("volatile-lru", {}, WARN, "warn"),
        ("allkeys-lru", {}, ERROR, "refuse"),
        ("allkeys-lru", {"allow_evicting_server": "true"}, WARN, "warn"),
    ],
)
def test_eviction_check_follows_the_servers_policy(
    redis_client: RedisClient,
    make_resources: Callable[..., dict[str, Any]],
    dagster_instance: dg.DagsterInstance,
    eviction_policy: Callable[[str], None],
    policy: str,
    extra: dict[str, str],
    expected: Any,
    level: str,
) -> None:
    eviction_policy(policy)

    evaluation = run_eviction_check(dagster_instance, make_resources(**extra))

    assert _verdict(evaluation) == expected
    meta = _metadata(evaluation)
    assert (meta["maxmemory_policy"], meta["verdict"]) == (policy, level)
    assert policy in evaluation.description
    if level == "refuse":
        assert "SENTINEL_ALLOW_EVICTING_SERVER" in evaluation.description


def test_eviction_check_passes_with_a_note_when_the_server_hides_the_policy(
    redis_client: RedisClient,
    settings: Settings,
    dagster_instance: dg.DagsterInstance,
    policy_hidden_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The password reaches Dagster code only through REDIS_URL, never resource config.
    monkeypatch.setenv("REDIS_URL", policy_hidden_url)
    resource = SettingsResource(overrides={"home": str(settings.home_dir)})
    resources = {
        "settings": resource,
        "alerts": AlertSink(settings=resource),
        "stream_inspector": StreamInspector(),
    }

    evaluation = run_eviction_check(dagster_instance, resources)

    assert _verdict(evaluation) == PASS
    assert _metadata(evaluation)["verdict"] == "unknown"
    assert "maxmemory-policy" in evaluation.description
