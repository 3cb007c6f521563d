"""The consumer serves one shard of a stream as it serves a stream, on a real 3-primary
Redis Cluster: the shard's keys (``shard_keys``, tags from the shard record) carry its hash
tag, so the commit, the dead letter and the idempotency marker stay single-slot scripts on
the shard's master. Three consumers, one a shard, each on a master of its own."""

from __future__ import annotations

import json
from typing import Any

import pytest
from redis.cluster import RedisCluster

from sentinel_platform.registry import TRANSACTIONS
from sentinel_platform.settings import Settings
from sentinel_platform.streams.consumer.settling.dead_letter import DeadLetter
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, shard_keys
from sentinel_platform.streams.sharding.record import recorded_tags
from sentinel_platform.streams.sharding.routing import shard_of
from sentinel_platform_tests.harness.consumers import MakeConsumer
from sentinel_platform_tests.harness.processors import CALLS_KEY
from sentinel_platform_tests.harness.streams import publish
from sentinel_platform_tests.harness.suite_on_cluster import make_settings

pytestmark = pytest.mark.cluster
__all__ = ["make_settings"]  # the fixture that points this module at the cluster

SHARDS = 3


def _shards(settings: Settings, client: RedisClient) -> list[StreamKeys]:
    tags = recorded_tags(client, TRANSACTIONS.stream_key(settings), SHARDS)
    return [shard_keys(settings, TRANSACTIONS, tag) for tag in tags]


def test_each_shard_is_served_exactly_once_with_dead_letters_on_its_own_master(
    settings: Settings, redis_client: RedisClient, make_consumer: MakeConsumer
) -> None:
    assert isinstance(redis_client, RedisCluster)
    shards = _shards(settings, redis_client)
    keys = [f"txn-{n}" for n in range(60)]
    routed: list[list[dict[str, str]]] = [[] for _ in shards]
    for key in keys + keys[:6]:  # six keys published twice: the copies meet on one shard
        routed[shard_of(key, SHARDS)].append({"key": key})
    bad = {"sleep_ms": "soon", "key": "bad"}
    routed[shard_of("bad", SHARDS)].append(bad)
    for shard, messages in zip(shards, routed, strict=True):
        publish(redis_client, shard, messages)

    for k, shard in enumerate(shards):
        consumer = make_consumer(f"shard-{k}", keys_for=lambda _s, shard=shard: shard)
        assert consumer.run(burst=True) == 0

    homes = set()
    for shard, messages in zip(shards, routed, strict=True):
        unique = {m["key"] for m in messages if m is not bad}
        assert redis_client.xlen(shard.results) == len(unique)  # copies: one effect
        assert int(redis_client.xpending(shard.stream, shard.group)["pending"]) == 0
        homes.add(redis_client.get_node_from_key(shard.stream).name)
        assert {redis_client.keyslot(name) for name in _written(redis_client, shard)} == {
            redis_client.keyslot(shard.stream)
        }
    assert len(homes) == SHARDS  # three masters
    assert redis_client.hgetall(CALLS_KEY) == dict.fromkeys(keys, "1")  # each key called once
    bad_shard = shards[shard_of("bad", SHARDS)]
    letters: Any = redis_client.xrange(bad_shard.dlq)
    [letter] = [DeadLetter.from_fields(fields) for _id, fields in letters]
    assert letter.reason == "invalid_message" and json.loads(letter.payload) == bad


def _written(client: RedisClient, shard: StreamKeys) -> list[str]:
    """Every key the shard's consumer left, found by the shard's tag."""
    tag = shard.stream[shard.stream.index("{") :]
    assert isinstance(client, RedisCluster)
    found: list[str] = []
    for node in client.get_primaries():
        found += list(client.scan_iter(match=f"*{tag}*", target_nodes=node))
    assert shard.stream in found and shard.results in found
    return found
