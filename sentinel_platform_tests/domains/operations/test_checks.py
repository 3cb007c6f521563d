"""The stream-health asset checks pass, warn and fail at their thresholds, with figures."""

from __future__ import annotations

from typing import Any

import dagster as dg
import pytest

from sentinel_platform.domains.operations.stream_health import (
    AI_CHECK,
    DELIVERY_CHECK,
    DLQ_CHECK,
    DLQ_ERROR_COUNT,
    EVICTION_CHECK,
    LAG_CHECK,
)
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.lag import write_lag_key
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.domains.operations.test_dead_letters import dead_letter
from sentinel_platform_tests.harness.operations import run_checks_job

PASS, WARN, ERROR = "pass", dg.AssetCheckSeverity.WARN, dg.AssetCheckSeverity.ERROR


def run_checks(instance: dg.DagsterInstance, resources: dict[str, Any]) -> dict[str, Any]:
    """Execute the scheduled checks job for real; return {check name: evaluation}.

    A blocking check failing with ERROR fails its step (and so the run) in Dagster 1.13;
    the other checks still run and record their evaluations. Backpressure is a WARN: the
    run succeeds and raises no run-failure alert; only a stream without a live worker
    fails it.
    """
    result = run_checks_job(instance, resources)
    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    lag_meta = evaluations[LAG_CHECK].metadata
    assert result.success is (lag_meta["zone"].value != "worker_off")
    return evaluations


def verdict(evaluation: Any) -> Any:
    return PASS if evaluation.passed else evaluation.severity


def test_lag_check_passes_warns_and_fails_at_thresholds(
    redis_client: RedisClient, settings: Settings, make_resources, dagster_instance
) -> None:
    keys = transaction_keys(settings)
    resources = make_resources(lag_warn=5, lag_pause=10)
    cases = [(4, PASS, "nominal"), (5, WARN, "elevated"), (10, WARN, "backpressure")]
    cases.append((None, ERROR, "worker_off"))
    for lag, expected, zone in cases:
        redis_client.flushall()
        redis_client.xgroup_create(keys.stream, keys.group, id="0", mkstream=True)
        for _ in range(lag or 3):
            redis_client.xadd(keys.stream, {"data": "{}"})
        if lag is not None:
            write_lag_key(redis_client, keys, lag, ttl_s=10)

        evaluations = run_checks(dagster_instance, resources)

        lag_eval = evaluations[LAG_CHECK]
        assert verdict(lag_eval) == expected, (lag, zone)
        meta = {k: v.value for k, v in lag_eval.metadata.items()}
        assert meta["zone"] == zone and meta["backlog"] == (lag or 3)
        assert meta["lag"] == (lag or 3) and meta["lag_warn"] == 5 and meta["lag_pause"] == 10
        assert set(evaluations) == {LAG_CHECK, DLQ_CHECK, DELIVERY_CHECK, EVICTION_CHECK, AI_CHECK}
        assert lag_eval.blocking


def test_dead_letter_check_warns_then_fails_as_dlq_grows(
    redis_client: RedisClient, settings: Settings, make_resources, dagster_instance
) -> None:
    redis_client.xadd(settings.dlq_stream, dead_letter("x-0", "synapse:axioms").to_fields())
    resources = make_resources()
    seen = []
    for total in (0, 1, DLQ_ERROR_COUNT):
        while redis_client.xlen(settings.dlq_stream) < total + 1:
            redis_client.xadd(settings.dlq_stream, dead_letter("1-0", "transactions").to_fields())
        evaluation = run_checks(dagster_instance, resources)[DLQ_CHECK]
        meta = {k: v.value for k, v in evaluation.metadata.items()}
        assert meta["recent_dead_letters"] == total and meta["dlq_depth"] == total + 1
        seen.append(verdict(evaluation))
    assert seen == [PASS, WARN, ERROR]


def test_demo_job_plans_no_check_so_none_reads_not_evaluated_after_it() -> None:
    """The demo materialises only its own asset: no check on a stream asset is planned in
    its runs (a check planned and skipped reads "Not evaluated" in the UI)."""
    from sentinel_platform.definitions import defs

    job = defs.resolve_job_def("demo_publish")
    assert not job.asset_layer.asset_graph.asset_check_keys
    assert {k.to_user_string() for k in job.asset_layer.executable_asset_keys} == {"demo_traffic"}


@pytest.mark.parametrize("job_name", ["publish_transactions", "publish_axioms"])
def test_publish_jobs_run_data_quality_and_eviction_but_not_stream_health_checks(
    job_name: str,
) -> None:
    from sentinel_platform.definitions import defs

    job = defs.resolve_job_def(job_name)
    checks = {key.name for key in job.asset_layer.asset_graph.asset_check_keys}
    assert checks - {EVICTION_CHECK}, "the blocking data-quality checks stay in the publish job"
    assert EVICTION_CHECK in checks, "evaluated by every publish, never Not evaluated after one"
    assert checks.isdisjoint({LAG_CHECK, DLQ_CHECK, DELIVERY_CHECK})


def test_delivery_check_fails_with_figures_when_messages_are_orphaned(
    redis_client: RedisClient, settings: Settings, make_resources, dagster_instance
) -> None:
    keys = transaction_keys(settings)
    redis_client.xgroup_create(keys.stream, keys.group, id="0", mkstream=True)
    redis_client.xadd(keys.stream, {"data": "{}"})
    healthy = run_checks(dagster_instance, make_resources())[DELIVERY_CHECK]
    redis_client.xreadgroup(keys.group, "dead-1", {keys.stream: ">"})  # no lease, no live peer
    redis_client.xadd(keys.stream, {"data": "{}"})

    orphaned = run_checks(dagster_instance, make_resources(lease_ttl_ms=200))[DELIVERY_CHECK]

    assert verdict(healthy) == PASS
    assert verdict(orphaned) == ERROR  # nobody alive to recover it
    meta = {k: v.value for k, v in orphaned.metadata.items()}
    assert meta["orphaned_messages"] == 1 and meta["live_consumers"] == 0
    assert meta["orphaned"] == {"dead-1": 1}
