"""The workers' core guarantees hold unchanged on a real 3-primary Redis Cluster.

Real ``python -m workers.watch_*`` processes with ``REDIS_URL=redis+cluster://...``: they
consume, recover a SIGKILLed peer's messages, dead-letter, publish lag and apply effects
once, while the two streams and everything derived from them sit on different shards.
"""

from __future__ import annotations

import time

import pytest
from redis.cluster import RedisCluster

from sentinel_platform.schemas import DeadLetter
from sentinel_platform.settings import Settings
from sentinel_platform.streams.connection import RedisClient
from sentinel_platform.streams.keys import StreamKeys, attempts_key, axiom_keys, transaction_keys
from sentinel_platform.streams.lag import measure_lag, read_lag_key
from sentinel_platform_tests.conftest import wait_until
from sentinel_platform_tests.scale_out.redis_cluster import RedisClusterProcess
from sentinel_platform_tests.workers.conftest import StartWorker, pending_of, publish
from sentinel_platform_tests.workers.processors_for_tests import CALLS_KEY

pytestmark = pytest.mark.cluster

LEASE_TTL_S = 1.0  # FAST_TIMINGS' SENTINEL_LEASE_TTL_MS


def results_of(client: RedisClient, keys: StreamKeys) -> list[dict[str, str]]:
    return [fields for _id, fields in client.xrange(keys.results)]


def calls(client: RedisClient) -> dict[str, int]:
    return {key: int(n) for key, n in client.hgetall(CALLS_KEY).items()}


def group_pending(client: RedisClient, keys: StreamKeys) -> int:
    return int(client.xpending(keys.stream, keys.group)["pending"])


def test_workers_consume_both_streams_each_on_its_own_shard(
    redis_cluster: RedisClusterProcess,
    cluster_settings: Settings,
    cluster_client: RedisClient,
    start_worker: StartWorker,
) -> None:
    tx, ax = transaction_keys(cluster_settings), axiom_keys(cluster_settings)
    publish(cluster_client, tx, [{"key": f"t{i}"} for i in range(150)])
    publish(cluster_client, ax, [{"key": f"a{i}"} for i in range(150)])
    start_worker("transactions", args=["--count", "20"])
    start_worker("axioms", args=["--count", "20"])

    wait_until(lambda: len(results_of(cluster_client, tx)) == 150, 30)
    wait_until(lambda: len(results_of(cluster_client, ax)) == 150, 30)
    assert {r["key"] for r in results_of(cluster_client, tx)} == {f"t{i}" for i in range(150)}
    assert {r["key"] for r in results_of(cluster_client, ax)} == {f"a{i}" for i in range(150)}
    assert set(calls(cluster_client).values()) == {1}
    assert group_pending(cluster_client, tx) == group_pending(cluster_client, ax) == 0

    assert isinstance(cluster_client, RedisCluster)
    for keys in (tx, ax):
        owner = redis_cluster.port_for_key(keys.stream)
        for name in (keys.results, keys.lag, keys.marker("t0" if keys is tx else "a0")):
            assert cluster_client.exists(name), name
            assert cluster_client.get_node_from_key(name).port == owner, name
    assert redis_cluster.port_for_key(tx.stream) != redis_cluster.port_for_key(ax.stream)


def test_sigkilled_workers_messages_are_processed_by_a_survivor_within_lease_ttl(
    cluster_settings: Settings, cluster_client: RedisClient, start_worker: StartWorker
) -> None:
    tx = transaction_keys(cluster_settings)
    publish(cluster_client, tx, [{"key": f"k{i}", "sleep_ms": "400"} for i in range(10)])
    victim = start_worker("transactions", args=["--count", "10"])
    wait_until(lambda: pending_of(cluster_client, tx, victim.consumer) >= 9, 15)
    survivor = start_worker("transactions").wait_ready(cluster_client)
    assert pending_of(cluster_client, tx, survivor.consumer) == 0, "a live worker was robbed"

    victim.kill()
    killed_at = time.monotonic()
    wait_until(lambda: len(results_of(cluster_client, tx)) == 10, LEASE_TTL_S + 2 + 10 * 0.4 + 5)
    # The first message the survivor took over was finished within lease TTL + 2 s.
    recovered = survivor.events("recovered")
    assert recovered, survivor.text()
    assert {r["key"] for r in results_of(cluster_client, tx)} == {f"k{i}" for i in range(10)}
    first_result_after_kill = _first_result_time(cluster_client, tx, killed_at)
    assert first_result_after_kill <= LEASE_TTL_S + 2, first_result_after_kill
    assert group_pending(cluster_client, tx) == 0
    # At most the one message in hand at the kill ran twice; its effect was still applied once.
    counts = calls(cluster_client)
    assert sum(counts.values()) - 10 <= 1, counts


def _first_result_time(client: RedisClient, keys: StreamKeys, since_monotonic: float) -> float:
    """Seconds from ``since_monotonic`` to the first result the survivor wrote (by stream id)."""
    offset_ms = time.time() * 1000 - time.monotonic() * 1000
    since_ms = since_monotonic * 1000 + offset_ms
    ids = [int(i.split("-")[0]) for i, _ in client.xrange(keys.results)]
    after = [ms for ms in ids if ms >= since_ms]
    assert after, "no result written after the kill"
    return (min(after) - since_ms) / 1000


def test_invalid_and_poison_messages_go_to_the_streams_own_dlq(
    cluster_settings: Settings, cluster_client: RedisClient, start_worker: StartWorker
) -> None:
    tx = transaction_keys(cluster_settings)
    limit = cluster_settings.reclaim_delivery_limit
    publish(cluster_client, tx, [{"nokey": "x"}, {"key": "p1", "poison": "1"}, {"key": "ok"}])
    worker = start_worker("transactions")

    wait_until(lambda: cluster_client.xlen(tx.dlq) == 2, 20)
    letters = {
        letter.reason: letter
        for letter in (DeadLetter.from_fields(f) for _i, f in cluster_client.xrange(tx.dlq))
    }
    assert set(letters) == {"invalid_message", "max_deliveries_exceeded"}
    assert '"nokey": "x"' in letters["invalid_message"].payload
    assert "poison message p1" in letters["max_deliveries_exceeded"].error
    assert calls(cluster_client)["p1"] == limit
    assert [r["key"] for r in results_of(cluster_client, tx)] == ["ok"]
    wait_until(lambda: group_pending(cluster_client, tx) == 0, 5)
    assert not cluster_client.hgetall(attempts_key(tx))
    assert worker.proc.poll() is None, "the worker must keep running"


def test_lag_key_equals_backlog_plus_pending_and_outlives_its_ttl_during_a_slow_message(
    cluster_settings: Settings, cluster_client: RedisClient, start_worker: StartWorker
) -> None:
    tx = transaction_keys(cluster_settings)
    start_worker("transactions", args=["--count", "1"]).wait_ready(cluster_client)
    publish(cluster_client, tx, [{"key": "slow", "sleep_ms": "4000"}])
    wait_until(lambda: group_pending(cluster_client, tx) == 1, 10)
    publish(cluster_client, tx, [{"key": f"q{i}"} for i in range(5)])

    wait_until(lambda: read_lag_key(cluster_client, tx) == 6, 5)
    reading = measure_lag(cluster_client, tx)
    assert (reading.backlog, reading.pending) == (5, 1)
    ttl_s = 2  # FAST_TIMINGS' SENTINEL_LAG_KEY_TTL_S
    deadline = time.monotonic() + ttl_s + 0.5
    while time.monotonic() < deadline:  # the heartbeat keeps it alive past its TTL
        assert read_lag_key(cluster_client, tx) == 6
        time.sleep(0.1)
    wait_until(lambda: read_lag_key(cluster_client, tx) == 0, 10)


def test_a_redelivered_natural_key_has_exactly_one_effect(
    cluster_settings: Settings, cluster_client: RedisClient, start_worker: StartWorker
) -> None:
    tx = transaction_keys(cluster_settings)
    publish(cluster_client, tx, [{"key": "same"}, {"key": "other"}, {"key": "same"}])
    start_worker("transactions")

    # Lag 0 means the group exists and all three deliveries were acknowledged.
    wait_until(lambda: measure_lag(cluster_client, tx).lag == 0, 15)
    results = results_of(cluster_client, tx)
    assert sorted(r["key"] for r in results) == ["other", "same"]
    assert cluster_client.get(tx.marker("same")) is not None
    ttl = cluster_client.ttl(tx.marker("same"))
    assert 0 < ttl <= cluster_settings.idempotency_ttl_s
    assert calls(cluster_client)["other"] == 1
