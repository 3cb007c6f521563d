"""Workers on a real 3-primary Redis Cluster keep each stream's keys on that stream's shard.

The workers suite's own cases run on the cluster in :mod:`.streams.consumer.test_suite_on_cluster`;
these add what only a cluster has: two streams served by different primaries, each with
its own DLQ, results, lag key and markers in its own slot.
"""

from __future__ import annotations

import pytest
from redis.cluster import RedisCluster

from sentinel_platform.schemas import DeadLetter
from sentinel_platform.settings import Settings
from sentinel_platform.streams.operators.dlq_admin import DlqFilter, list_entries, replay
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import (
    StreamKeys,
    attempt_key,
    attempt_key_prefix,
    axiom_keys,
    transaction_keys,
)
from sentinel_platform_tests.harness.processes import StartWorker
from sentinel_platform_tests.harness.processors import CALLS_KEY
from sentinel_platform_tests.harness.redis_cluster import RedisClusterProcess
from sentinel_platform_tests.harness.streams import publish
from sentinel_platform_tests.harness.suite_on_cluster import worker_env  # noqa: F401 (workers on the cluster)
from sentinel_platform_tests.harness.waits import wait_until

pytestmark = pytest.mark.cluster


def results_of(client: RedisClient, keys: StreamKeys) -> list[dict[str, str]]:
    return [fields for _id, fields in client.xrange(keys.results)]


def calls(client: RedisClient) -> dict[str, int]:
    return {key: int(n) for key, n in client.hgetall(CALLS_KEY).items()}


def group_pending(client: RedisClient, keys: StreamKeys) -> int:
    return int(client.xpending(keys.stream, keys.group)["pending"])


def attempt_records(client: RedisClient, keys: StreamKeys) -> list[str]:
    """Every per-message attempt record of ``keys.stream`` left on the cluster."""
    return list(client.scan_iter(match=f"{attempt_key_prefix(keys)}*"))


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

    # two workers, three masters, a loaded 2-core machine
    wait_until(lambda: len(results_of(cluster_client, tx)) == 150, 90)
    wait_until(lambda: len(results_of(cluster_client, ax)) == 150, 90)
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


def test_each_stream_dead_letters_into_its_own_dlq_on_its_own_shard(
    redis_cluster: RedisClusterProcess,
    cluster_settings: Settings,
    cluster_client: RedisClient,
    start_worker: StartWorker,
) -> None:
    tx, ax = transaction_keys(cluster_settings), axiom_keys(cluster_settings)
    limit = cluster_settings.reclaim_delivery_limit
    tx_ids = publish(
        cluster_client, tx, [{"nokey": "x"}, {"key": "p1", "poison": "1"}, {"key": "ok"}]
    )
    publish(cluster_client, ax, [{"nokey": "y"}, {"key": "a-ok"}])
    tx_worker = start_worker("transactions")
    ax_worker = start_worker("axioms")

    wait_until(lambda: cluster_client.xlen(tx.dlq) == 2 and cluster_client.xlen(ax.dlq) == 1, 20)
    tx_letters = {
        letter.reason: letter
        for letter in (DeadLetter.from_fields(f) for _i, f in cluster_client.xrange(tx.dlq))
    }
    (ax_letter,) = (DeadLetter.from_fields(f) for _i, f in cluster_client.xrange(ax.dlq))
    assert set(tx_letters) == {"invalid_message", "max_deliveries_exceeded"}
    assert '"nokey": "x"' in tx_letters["invalid_message"].payload
    assert "poison message p1" in tx_letters["max_deliveries_exceeded"].error
    assert (ax_letter.reason, ax_letter.stream) == ("invalid_message", ax.stream)
    assert '"nokey": "y"' in ax_letter.payload
    assert calls(cluster_client)["p1"] == limit
    assert [r["key"] for r in results_of(cluster_client, tx)] == ["ok"]
    assert [r["key"] for r in results_of(cluster_client, ax)] == ["a-ok"]
    wait_until(lambda: group_pending(cluster_client, tx) == group_pending(cluster_client, ax) == 0)
    # The poison message was recorded on every redelivery; dead-lettering deleted its record.
    assert not cluster_client.exists(attempt_key(tx, tx_ids[1]))
    assert attempt_records(cluster_client, tx) == attempt_records(cluster_client, ax) == []
    assert tx_worker.proc.poll() is None and ax_worker.proc.poll() is None

    assert isinstance(cluster_client, RedisCluster)
    tx_shard = cluster_client.get_node_from_key(tx.dlq).port
    ax_shard = cluster_client.get_node_from_key(ax.dlq).port
    assert (tx_shard, ax_shard) == (
        redis_cluster.port_for_key(tx.stream),
        redis_cluster.port_for_key(ax.stream),
    )
    assert tx_shard != ax_shard


def test_replay_from_a_streams_dlq_is_atomic_on_the_cluster(
    cluster_settings: Settings, cluster_client: RedisClient, start_worker: StartWorker
) -> None:
    tx = transaction_keys(cluster_settings)
    publish(cluster_client, tx, [{"key": "fixed-later", "poison": "1"}])
    worker = start_worker("transactions")
    wait_until(lambda: cluster_client.xlen(tx.dlq) == 1, 20)
    worker.kill()

    (entry,) = list_entries(cluster_client, cluster_settings, DlqFilter(stream=tx.stream))
    first = replay(cluster_client, cluster_settings, [entry])
    second = replay(cluster_client, cluster_settings, [entry])

    assert [o.status for o in first.outcomes] == ["replayed"]
    assert [o.status for o in second.outcomes] == ["already_replayed"]
    assert cluster_client.xlen(tx.dlq) == 0
    replayed = cluster_client.xrange(tx.stream)[-1][1]
    assert (replayed["key"], replayed["_replayed_from"]) == ("fixed-later", entry.letter.message_id)


def test_workers_reload_their_scripts_after_every_primary_forgot_them(
    redis_cluster: RedisClusterProcess,
    cluster_settings: Settings,
    cluster_client: RedisClient,
    start_worker: StartWorker,
) -> None:
    """A failover or restart empties a node's script cache; pipelined EVALSHA must recover."""
    tx = transaction_keys(cluster_settings)
    worker = start_worker("transactions").wait_ready(cluster_client)
    publish(cluster_client, tx, [{"key": "before"}])
    wait_until(lambda: len(results_of(cluster_client, tx)) == 1, 10)

    for port in redis_cluster.ports:
        with redis_cluster.node_client(port) as node:
            node.script_flush()
    publish(cluster_client, tx, [{"key": f"after-{i}"} for i in range(20)])

    wait_until(lambda: len(results_of(cluster_client, tx)) == 21, 15)
    assert group_pending(cluster_client, tx) == 0
    assert worker.proc.poll() is None, worker.text()
