"""A sharded stream's base key, served by its workers' forwarder (``workers.forwarding``)
on a real server: each entry moves to the shard of its key, an invalid one to the DLQ
with its reason and payload, the base key is left empty, the stream's one lag is written
at the logical key; an entry a dead forwarder left pending is forwarded again, its key
still gets one effect and an invalid one still one dead letter."""

from __future__ import annotations

import dataclasses
import threading

from sentinel_platform.registry import TRANSACTIONS
from sentinel_platform.schemas import DeadLetter
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.lag import read_lag_key
from sentinel_platform.streams.consumer.group import ensure_group
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, keys_for
from sentinel_platform.streams.sharding.routing import shard_of
from sentinel_platform.streams.sharding.shards import keys_of_shards
from sentinel_platform_tests.harness.consumers import MakeConsumer
from sentinel_platform_tests.harness.processors import CALLS_KEY, counting
from sentinel_platform_tests.harness.streams import publish
from sentinel_platform_tests.harness.waits import wait_until
from workers.forwarding import Forwarder, key_reader

SHARDED = dataclasses.replace(TRANSACTIONS, shards=3)
INVALID = {"key": "bad", "sleep_ms": "soon"}


def _forwarder(
    client: RedisClient, settings: Settings, consumer: str = "w1", idle_ms: int = 10_000
) -> tuple[Forwarder, StreamKeys, tuple[StreamKeys, ...]]:
    shards = keys_of_shards(client, settings, SHARDED)
    base = keys_for(settings, SHARDED)
    processor = counting(settings)
    key_of = key_reader(processor.parse, processor.natural_key)
    stop = threading.Event()
    forwarder = Forwarder(client, base, shards, key_of, consumer, settings, stop, idle_ms)
    return forwarder, base, shards


def _dead_letters(client: RedisClient, base: StreamKeys) -> list[DeadLetter]:
    return [DeadLetter.from_fields(fields) for _id, fields in client.xrange(base.dlq)]


def _stream_keys(client: RedisClient, keys: StreamKeys) -> list[str]:
    return [fields["key"] for _id, fields in client.xrange(keys.stream)]


def test_base_entries_move_to_their_keys_shard_and_the_lag_is_the_streams(
    settings: Settings, redis_client: RedisClient
) -> None:
    forwarder, base, shards = _forwarder(redis_client, settings)
    keys = [f"k{n}" for n in range(30)]
    ids = publish(redis_client, base, [{"key": k} for k in keys] + [INVALID])
    ensure_group(redis_client, base)

    assert forwarder.step() == len(keys) + 1
    for k, shard in enumerate(shards):
        assert _stream_keys(redis_client, shard) == [key for key in keys if shard_of(key, 3) == k]
    assert redis_client.xlen(base.stream) == 0
    assert int(redis_client.xpending(base.stream, base.group)["pending"]) == 0
    [letter] = _dead_letters(redis_client, base)
    assert (letter.message_id, letter.original_fields) == (ids[-1], INVALID)
    assert letter.reason == "invalid_message" and "sleep_ms" in letter.error
    assert forwarder.write_lag() == len(keys)  # every shard's backlog, as one stream
    assert read_lag_key(redis_client, base) == len(keys)


def test_an_entry_a_dead_forwarder_left_pending_is_forwarded_again_and_applied_once(
    settings: Settings, redis_client: RedisClient, make_consumer: MakeConsumer
) -> None:
    forwarder, base, shards = _forwarder(redis_client, settings, idle_ms=1)
    publish(redis_client, base, [{"key": "k1"}, INVALID])
    ensure_group(redis_client, base)
    dead, _base, _shards = _forwarder(redis_client, settings, consumer="dead")
    # the dead one read both, forwarded the first and dead-lettered the second, then died
    # before its XACK and XDEL
    [(_stream, entries)] = redis_client.xreadgroup(base.group, "dead", {base.stream: ">"})
    shard = shards[shard_of("k1", 3)]
    redis_client.xadd(shard.stream, entries[0][1])
    dead._dead_letter([(entries[1][0], entries[1][1], "SchemaError: sleep_ms")])

    # once idle past the forwarder's idle time (1 ms here), claimed and forwarded again
    wait_until(lambda: forwarder.step() == 1, 5, 0.01)
    assert _stream_keys(redis_client, shard) == ["k1", "k1"]
    assert len(_dead_letters(redis_client, base)) == 1  # acknowledged with it: never again
    assert redis_client.xlen(base.stream) == 1  # the dead one's, acknowledged, not deleted
    forwarder.trim()
    assert redis_client.xlen(base.stream) == 0

    consumer = make_consumer("c", keys_for=lambda _s: shard)
    assert consumer.run(burst=True) == 0
    assert redis_client.xlen(shard.results) == 1  # the copies meet: one effect
    assert redis_client.hget(CALLS_KEY, "k1") == "1"


def test_trim_keeps_what_is_pending_or_not_yet_read(
    settings: Settings, redis_client: RedisClient
) -> None:
    forwarder, base, _shards = _forwarder(redis_client, settings)
    ids = publish(redis_client, base, [{"key": f"k{n}"} for n in range(4)])
    ensure_group(redis_client, base)
    redis_client.xreadgroup(base.group, "w2", {base.stream: ">"}, count=2)
    redis_client.xack(base.stream, base.group, ids[0])  # done, not deleted

    forwarder.trim()
    assert [entry_id for entry_id, _ in redis_client.xrange(base.stream)] == ids[1:]
