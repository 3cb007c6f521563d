"""The batch lane is not lag: a full batch lane and a big batch ledger leave the lag check
passing, the lag gate's view nominal and the producers' backpressure guard open; the
check's metadata show the batch lane apart, and a batch past its completion window there."""

from __future__ import annotations

from typing import Any

import dagster as dg

from sentinel_platform.domains.operations.lag_gate import build_lag_sensor
from sentinel_platform.domains.operations.stream_health import LAG_CHECK
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.lag import write_lag_key
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform.streams.producer.backpressure import BackpressureGuard
from sentinel_platform.streams.producer.pacing_limits import BackpressureConfig
from sentinel_platform_tests.harness.batch_lane import fill_batch_lane, record_batch
from sentinel_platform_tests.harness.operations import (
    LAG_THRESHOLDS,
    TRANSACTIONS,
    Clock,
    observations,
    run_checks_job,
    tick,
)

#: Far past the pause limit (10) had they been lag.
WAITING, AT_PROVIDER = 5_000, 2_000


def _full_batch_lane(client: RedisClient, keys: StreamKeys) -> None:
    """The live stream with its group and a lag of 1; its batch lane 7,000 messages deep,
    2,000 of them in two batches at the provider, the older 30 hours old."""
    client.xgroup_create(keys.stream, keys.group, id="0", mkstream=True)
    client.xadd(keys.stream, {"data": "{}"})
    write_lag_key(client, keys, 1, ttl_s=30)
    fill_batch_lane(client, keys, WAITING + AT_PROVIDER, AT_PROVIDER)
    record_batch(client, keys, "b-old", 30, "finalizing", count=1_500)
    record_batch(client, keys, "b-new", 2, "in_progress", count=500)


def test_a_full_batch_lane_leaves_the_lag_check_passing_and_is_shown_apart(
    redis_client: RedisClient,
    txn_keys: StreamKeys,
    make_resources: Any,
    dagster_instance: dg.DagsterInstance,
) -> None:
    resources = make_resources(**LAG_THRESHOLDS)
    _full_batch_lane(redis_client, txn_keys)

    result = run_checks_job(dagster_instance, resources)

    lag_eval = {e.check_name: e for e in result.get_asset_check_evaluations()}[LAG_CHECK]
    meta = {k: v.value for k, v in lag_eval.metadata.items()}
    assert lag_eval.passed, meta
    assert (meta["zone"], meta["lag"]) == ("nominal", 1)
    assert (meta["batch_waiting"], meta["batch_at_provider"], meta["batch_batches"]) == (
        WAITING,
        AT_PROVIDER,
        2,
    )
    assert meta["batch_provider_status"] == "finalizing"
    assert 30 * 3600 <= meta["batch_oldest_age_s"] < 30 * 3600 + 120
    assert meta["batch_overdue_level"] == "WARN"
    assert meta["batch_overdue"].startswith("WARN: the oldest batch (submitted, provider")


def test_a_full_batch_lane_never_holds_the_producers(
    redis_client: RedisClient,
    txn_keys: StreamKeys,
    settings: Settings,
    make_resources: Any,
    dagster_instance: dg.DagsterInstance,
    clock: Clock,
) -> None:
    resources = make_resources(**LAG_THRESHOLDS)  # flushes the server first
    _full_batch_lane(redis_client, txn_keys)
    config = BackpressureConfig(**LAG_THRESHOLDS)
    guard = BackpressureGuard(redis_client, txn_keys, config)

    budget = guard.wait_before_batch(100)

    assert budget > 0
    assert (guard.stats.hard_events, guard.stats.soft_events, guard.stats.paused_s) == (0, 0, 0)
    assert guard.stats.max_lag == 1  # the live stream's lag: none of the batch lane's 7,000
    assert not redis_client.exists(txn_keys.paused)
    data = tick(build_lag_sensor([TRANSACTIONS], clock=clock), dagster_instance, resources, None)
    (seen,) = observations(data, TRANSACTIONS.asset_key)
    assert (seen["zone"], seen["lag"], seen["hard_backpressure_episodes"]) == ("nominal", 1, 0)
    assert (seen["batch_waiting"], seen["batch_at_provider"]) == (WAITING, AT_PROVIDER)
    assert not redis_client.exists(txn_keys.paused)
