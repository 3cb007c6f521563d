"""The guard's one-round-trip reading against a real Redis: the group's own figures, the
published lag only from the level that holds, and the producers counting each other."""

from __future__ import annotations

from collections.abc import Callable

from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform.streams.producer.backpressure import BackpressureGuard
from sentinel_platform.streams.producer.backpressure_signal import producers_key
from sentinel_platform.streams.producer.publish import publish_rows


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
