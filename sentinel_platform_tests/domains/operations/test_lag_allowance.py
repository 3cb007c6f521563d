"""The lag sensor and the lag check judge a pool by what its workers published they hold.

The issue's case, against a real Redis and a real sensor tick: one worker with
``SENTINEL_WORKER_CONCURRENCY=8`` on a 200 ms processor drains 40 rows/s and holds at most
8 messages. 775 waiting are about 19 s of work against a 10 s pause limit: backpressure,
where the old formula (read count 100 x 8 threads = 800 "in flight") said nominal.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sentinel_platform.domains.operations.check_verdict import WARN
from sentinel_platform.domains.operations.lag_gate import build_lag_sensor
from sentinel_platform.domains.operations.lag_verdict import evaluate_lag
from sentinel_platform.domains.operations.targets import TRANSACTIONS
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.drain import write_drain_rate
from sentinel_platform.streams.backlog.holdings import publish_holding
from sentinel_platform.streams.backlog.lag import measure_lag, write_lag_key
from sentinel_platform.streams.operators.group_view import lag_snapshot
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, transaction_keys
from sentinel_platform_tests.harness.operations import observations, tick

PENDING = 775
RATE = 40.0  # 8 threads x 1 / 0.2 s
WORKER = "worker-a"


def _busy_pool(client: RedisClient, keys: StreamKeys, holds: int | None) -> None:
    """775 waiting, 8 of them read by a live worker that published ``holds`` (None: none)."""
    client.xgroup_create(keys.stream, keys.group, id="0", mkstream=True)
    for i in range(PENDING):
        client.xadd(keys.stream, {"data": f'{{"n": {i}}}'})
    client.xreadgroup(keys.group, WORKER, {keys.stream: ">"}, count=8)
    client.set(keys.lease(WORKER), "1", px=60_000)
    client.hset(keys.consumers, WORKER, "{}")
    write_lag_key(client, keys, measure_lag(client, keys).lag, ttl_s=60)
    write_drain_rate(client, keys, RATE, PENDING)
    if holds is not None:
        publish_holding(client, keys, WORKER, holds, 60)


def test_the_sensor_pauses_a_c8_pool_with_20_s_of_work_it_used_to_call_nominal(
    redis_client: RedisClient,
    settings: Settings,
    make_resources: Callable[..., dict[str, Any]],
    dagster_instance: Any,
    clock: Any,
) -> None:
    resources = make_resources(worker_concurrency=8)  # flushes the server first
    keys = transaction_keys(settings)
    _busy_pool(redis_client, keys, holds=8)
    data = tick(build_lag_sensor([TRANSACTIONS], clock=clock), dagster_instance, resources, None)
    (obs,) = observations(data, TRANSACTIONS.asset_key)
    assert (obs["zone"], obs["in_flight"], obs["lag"]) == ("backpressure", 8, PENDING)
    assert obs["work_s"] > 10
    assert redis_client.get(keys.paused).startswith("sensor:backpressure:")


def test_the_check_counts_only_what_the_live_workers_published(
    redis_client: RedisClient, make_settings: Callable[..., Settings]
) -> None:
    settings = make_settings(worker_concurrency=8)
    keys = transaction_keys(settings)
    _busy_pool(redis_client, keys, holds=8)
    verdict = evaluate_lag(lag_snapshot(redis_client, keys), settings)
    assert not verdict.passed and verdict.severity == WARN and verdict.blocks
    assert verdict.metadata["zone"] == "backpressure"
    assert verdict.metadata["in_flight"] == 8
    assert "8 in flight" in verdict.description


def test_with_nothing_published_everything_pending_is_work(
    redis_client: RedisClient, make_settings: Callable[..., Settings]
) -> None:
    settings = make_settings(worker_concurrency=8)
    keys = transaction_keys(settings)
    _busy_pool(redis_client, keys, holds=None)
    snapshot = lag_snapshot(redis_client, keys)
    assert (snapshot.allowance, snapshot.consumers_alive) == (0, 1)
    verdict = evaluate_lag(snapshot, settings)
    assert verdict.metadata["in_flight"] == 0
    assert verdict.metadata["lag_pause"] == int(RATE * 10)
