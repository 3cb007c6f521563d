"""What the lag sensor, the lag check and the gate read of a stream
(``operators.group_view.stream_snapshot``), on a real server: a stream of one shard is
read as before; a sharded one as one stream, its base key's backlog with every shard's,
the lag its workers write at the logical key, the live workers those on every shard."""

from __future__ import annotations

import dataclasses

from sentinel_platform.domains.operations.lag_verdict import evaluate_lag
from sentinel_platform.registry import TRANSACTIONS
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.lag import queue_lag_key
from sentinel_platform.streams.consumer.group import ensure_group
from sentinel_platform.streams.operators.group_view import lag_snapshot, stream_snapshot
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import keys_for
from sentinel_platform.streams.sharding.shards import keys_of_shards
from sentinel_platform_tests.harness.streams import publish

SHARDED = dataclasses.replace(TRANSACTIONS, shards=3)


def test_one_shard_is_read_as_before(settings: Settings, redis_client: RedisClient) -> None:
    keys = keys_for(settings, TRANSACTIONS)
    publish(redis_client, keys, [{"key": f"k{n}"} for n in range(4)])
    assert stream_snapshot(redis_client, settings, TRANSACTIONS) == lag_snapshot(redis_client, keys)


def test_a_sharded_stream_is_read_as_one(settings: Settings, redis_client: RedisClient) -> None:
    shards = keys_of_shards(redis_client, settings, SHARDED)
    base = keys_for(settings, SHARDED)
    for k, shard in enumerate(shards):
        publish(redis_client, shard, [{"key": f"k{k}-{n}"} for n in range(k + 1)])
        ensure_group(redis_client, shard)
    publish(redis_client, base, [{"key": "b1"}, {"key": "b2"}])  # not yet forwarded

    snapshot = stream_snapshot(redis_client, settings, SHARDED)
    assert (snapshot.reading.backlog, snapshot.lag, snapshot.worker_lag) == (8, 8, None)
    assert snapshot.shard_lags == (1, 2, 3)  # each shard's, for the observation's metadata
    for k, shard in enumerate(shards):  # a worker alive on two shards of three
        if k:
            redis_client.hset(shard.consumers, "w1", "{}")
            redis_client.set(shard.lease("w1"), "x", px=60_000)
    assert stream_snapshot(redis_client, settings, SHARDED).consumers_alive == 0
    redis_client.hset(shards[0].consumers, "w1", "{}")
    redis_client.set(shards[0].lease("w1"), "x", px=60_000)
    assert stream_snapshot(redis_client, settings, SHARDED).consumers_alive == 1
    queue_lag_key(redis_client, base, 9, 60)  # what the workers' forwarders write
    assert stream_snapshot(redis_client, settings, SHARDED).lag == 9


def test_the_lag_observation_carries_each_shards_lag(
    settings: Settings, redis_client: RedisClient
) -> None:
    shards = keys_of_shards(redis_client, settings, SHARDED)
    for k, shard in enumerate(shards):
        publish(redis_client, shard, [{"key": f"k{k}-{n}"} for n in range(2 * k)])
    verdict = evaluate_lag(stream_snapshot(redis_client, settings, SHARDED), settings)
    assert [verdict.metadata[f"shard_{k}_lag"] for k in range(3)] == [0, 2, 4]
    assert verdict.metadata["lag"] == 6
    plain = evaluate_lag(stream_snapshot(redis_client, settings, TRANSACTIONS), settings)
    assert not [name for name in plain.metadata if name.startswith("shard_")]


def test_one_hot_shard_sets_the_zone_of_the_whole_stream(
    settings: Settings, redis_client: RedisClient
) -> None:
    """30 waiting on one shard of three are 90 for the zone: that shard drains at a third
    of the stream's rate, so the stream is as late as 90 spread evenly."""
    shards = keys_of_shards(redis_client, settings, SHARDED)
    for shard in shards:
        ensure_group(redis_client, shard)
        redis_client.hset(shard.consumers, "w1", "{}")
        redis_client.set(shard.lease("w1"), "x", px=60_000)
    publish(redis_client, shards[2], [{"key": f"hot-{n}"} for n in range(30)])
    snapshot = stream_snapshot(redis_client, settings, SHARDED)
    assert (snapshot.lag, snapshot.zone_lag, snapshot.shard_lags) == (30, 90, (0, 0, 30))
    even = [{"key": f"k{n}"} for n in range(10)]
    for shard in shards[:2]:
        publish(redis_client, shard, even)
    assert stream_snapshot(redis_client, settings, SHARDED).zone_lag == 90  # 10, 10, 30
    assert lag_snapshot(redis_client, shards[0]).zone_lag == 10  # one shard: as it is
