"""The guard's one-round-trip reading against a real Redis: the group's own figures, the
published lag only from the level that holds, the producers counting each other, and a
sharded stream measured whole (a hot shard not hidden by cold ones)."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sentinel_platform.registry import StreamSpec
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, keys_for
from sentinel_platform.streams.producer.backpressure import BackpressureGuard, BackpressureTimeout
from sentinel_platform.streams.producer.backpressure_signal import producers_key
from sentinel_platform.streams.producer.pacing_limits import BackpressureConfig
from sentinel_platform.streams.producer.publish import publish_rows
from sentinel_platform.streams.sharding.shards import keys_of_shards


def _entries(n: int) -> list[dict[str, str]]:
    return [{"data": f'{{"n":{i}}}'} for i in range(n)]


def test_lag_is_measured_from_the_group_even_when_the_lag_key_is_stale(
    redis_client: RedisClient, txn_keys: StreamKeys, make_guard: Callable[..., BackpressureGuard]
) -> None:
    redis_client.xgroup_create(txn_keys.stream, txn_keys.group, id="0", mkstream=True)
    redis_client.set(txn_keys.lag, 0, ex=10)  # as a worker wrote it before the rows came
    publish_rows(redis_client, txn_keys, _entries(150), 150)
    redis_client.xreadgroup(txn_keys.group, "c1", {txn_keys.stream: ">"}, count=30)
    signal = make_guard().read_signal()
    assert (signal.lag, signal.entries_read) == (150, 30)  # 120 backlog + 30 pending
    redis_client.set(txn_keys.lag, 140)  # a stale published figure does not steer...
    assert make_guard().read_signal().lag == 150
    redis_client.set(txn_keys.lag, 400)  # ...but one at the hard limit stops the producer
    assert make_guard().read_signal().lag == 400


def test_two_producers_on_one_stream_each_count_the_other(
    redis_client: RedisClient, txn_keys: StreamKeys, make_guard: Callable[..., BackpressureGuard]
) -> None:
    first, second = make_guard(), make_guard()
    assert first.read_signal().producers == 1
    assert second.read_signal().producers == 2
    assert first.read_signal().producers == 2
    assert redis_client.zcard(producers_key(txn_keys)) == 2


def test_a_hot_shard_holds_the_producer_of_the_whole_stream(
    redis_client: RedisClient, settings: Settings, sharded_stream: StreamSpec
) -> None:
    """Every shard's group is read in the one round trip: 100 entries waiting on one of
    three shards read as 300 (the stream as late as that shard), where the base key alone
    reads 0; the drain is the shards' completions."""
    shards = keys_of_shards(redis_client, settings, sharded_stream)
    base = keys_for(settings, sharded_stream)
    for keys in shards:
        redis_client.xgroup_create(keys.stream, keys.group, id="0", mkstream=True)
    redis_client.xgroup_create(base.stream, base.group, id="0", mkstream=True)
    publish_rows(redis_client, shards[1], _entries(100), 100)
    publish_rows(redis_client, shards[2], _entries(10), 10)
    redis_client.xreadgroup(shards[2].group, "c1", {shards[2].stream: ">"}, count=10)
    for entry_id, _fields in redis_client.xrange(shards[2].stream):
        redis_client.xack(shards[2].stream, shards[2].group, entry_id)

    config = BackpressureConfig(lag_warn=50, lag_pause=200, lag_pause_poll_ms=20, max_pause_s=0.5)
    alone = BackpressureGuard(redis_client, base, config)
    assert alone.read_signal().lag == 0
    assert alone.wait_before_batch(10) == 10  # the base key alone would let it publish
    whole = BackpressureGuard(redis_client, base, config, shards=shards)
    signal = whole.read_signal()
    assert (signal.lag, signal.entries_read, signal.completed) == (300, 10, 10)
    with pytest.raises(BackpressureTimeout, match="300"):  # held at the stop, then gives up
        whole.wait_before_batch(10)
