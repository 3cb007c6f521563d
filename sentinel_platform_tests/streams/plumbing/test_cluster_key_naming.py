"""On a Redis Cluster every key of a stream's atomic operations shares the stream's slot.

The slots are computed by the cluster itself (``CLUSTER KEYSLOT``), not by our own CRC,
and the last test shows the naming is load-bearing: the same script with single-server
key names is refused by the cluster.
"""

from __future__ import annotations

import time

import pytest
import redis
from redis.cluster import RedisCluster

from sentinel_platform.settings import Settings
from sentinel_platform.streams.consumer.settling.dead_letter import DEAD_LETTER
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import (
    StreamKeys,
    all_stream_keys,
    attempt_key,
    dead_letters_key,
    dlq_streams,
    shard_keys,
    stream_keys,
)
from sentinel_platform.streams.producer.publish import stop_key
from sentinel_platform.streams.sharding.record import recorded_tags
from sentinel_platform_tests.harness.redis_cluster import RedisClusterProcess

pytestmark = pytest.mark.cluster


def keys_of_atomic_ops(keys: StreamKeys) -> list[str]:
    """Every key a script or a same-slot pipeline touches together with the stream."""
    names = [
        keys.stream,
        keys.dlq,
        keys.results,
        keys.lag,
        keys.paused,
        keys.lease("host-1234"),
        keys.marker("txn-0001"),
        keys.marker("sensor-7|2026-11-21T14:00:00+00:00"),
        keys.consumers,
        attempt_key(keys, "1732280000000-0"),
        attempt_key(keys, "1732280000000-17"),
        stop_key(keys, "run-1"),
    ]
    return names + ([keys.recent] if keys.recent else [])


def server_slot(cluster: RedisClusterProcess, key: str) -> int:
    with cluster.node_client(cluster.ports[0]) as node:
        return int(node.execute_command("CLUSTER KEYSLOT", key))


@pytest.mark.parametrize("stream", ["transactions", "axioms"])
def test_every_key_of_a_stream_hashes_to_the_stream_slot(
    redis_cluster: RedisClusterProcess, cluster_settings: Settings, stream: str
) -> None:
    transactions, axioms = all_stream_keys(cluster_settings)
    keys = transactions if stream == "transactions" else axioms
    slot = server_slot(redis_cluster, keys.stream)
    slots = {name: server_slot(redis_cluster, name) for name in keys_of_atomic_ops(keys)}
    assert slots == dict.fromkeys(slots, slot)


def test_every_key_of_a_shard_hashes_to_the_shard_slot_and_shards_to_distinct_slots(
    redis_cluster: RedisClusterProcess, cluster_settings: Settings, cluster_client: RedisClient
) -> None:
    tags = recorded_tags(cluster_client, "transactions", 3)
    slots = set()
    for tag in tags:
        keys = shard_keys(cluster_settings, "transactions", tag)
        assert keys.stream == f"transactions:{tag}" and keys.group == "sentinel-consumers"
        slot = server_slot(redis_cluster, keys.stream)
        found = {name: server_slot(redis_cluster, name) for name in keys_of_atomic_ops(keys)}
        assert found == dict.fromkeys(found, slot)
        slots.add(slot)
    assert len(slots) == 3


def test_the_two_streams_are_served_by_different_primaries(
    redis_cluster: RedisClusterProcess, cluster_settings: Settings, cluster_client: RedisClient
) -> None:
    transactions, axioms = all_stream_keys(cluster_settings)
    assert isinstance(cluster_client, RedisCluster)
    owners = {
        keys.stream: cluster_client.get_node_from_key(keys.stream).port
        for keys in (transactions, axioms)
    }
    assert owners[transactions.stream] == redis_cluster.port_for_key(transactions.dlq)
    assert owners[axioms.stream] == redis_cluster.port_for_key(axioms.dlq)
    assert owners[transactions.stream] != owners[axioms.stream]


def test_cluster_names_carry_the_stream_tag(cluster_settings: Settings) -> None:
    cluster_keys = all_stream_keys(cluster_settings)
    assert [k.dlq for k in cluster_keys] == ["{transactions}:dlq", "{synapse:axioms}:dlq"]
    assert [k.lag for k in cluster_keys] == [
        "{transactions}:consumer_lag",
        "{synapse:axioms}:consumer_lag",
    ]
    assert [k.stream for k in cluster_keys] == ["transactions", "synapse:axioms"]
    assert [attempt_key(k, "1-0") for k in cluster_keys] == [
        "{transactions}:attempts:1-0",
        "{synapse:axioms}:attempts:1-0",
    ]
    assert dlq_streams(cluster_settings) == ["{synapse:axioms}:dlq", "{transactions}:dlq"]


def test_dead_letter_script_commits_on_the_cluster_and_single_server_names_are_refused(
    cluster_settings: Settings, cluster_client: RedisClient
) -> None:
    keys = all_stream_keys(cluster_settings)[0]
    cluster_client.xgroup_create(keys.stream, keys.group, id="0", mkstream=True)
    message_id = cluster_client.xadd(keys.stream, {"data": "{}"})
    cluster_client.xreadgroup(keys.group, "c1", {keys.stream: ">"}, count=1)
    now_ms = int(time.time() * 1000)
    args = [keys.group, message_id, 1000, now_ms, now_ms - 60_000, "reason", "invalid_message"]

    flat = stream_keys(
        cluster_settings.model_copy(update={"redis_cluster": False, "redis_url": None}),
        keys.stream,
        keys.group,
        "sentinel:verdicts",
    )
    assert flat.dlq == "sentinel:dlq"
    with pytest.raises((redis.RedisError, redis.exceptions.RedisClusterException)):
        DEAD_LETTER.run(
            cluster_client,
            [flat.stream, flat.dlq, attempt_key(flat, message_id), dead_letters_key(flat)],
            args,
        )

    record = attempt_key(keys, message_id)
    dead = dead_letters_key(keys)  # the stream's slot too: the script stays single-slot
    reply = DEAD_LETTER.run(cluster_client, [keys.stream, keys.dlq, record, dead], args)
    assert reply
    assert cluster_client.xlen(keys.dlq) == 1
    assert cluster_client.xpending(keys.stream, keys.group)["pending"] == 0
