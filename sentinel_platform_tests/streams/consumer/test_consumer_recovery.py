"""Recovery in-process: a dead holder's messages are taken over, a live one's never are,
trimmed entries leave nothing behind."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sentinel_platform.streams.consumer.group import ensure_group
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.consumers import MakeConsumer, records_of
from sentinel_platform_tests.harness.processors import CALLS_KEY
from sentinel_platform_tests.harness.streams import one_batch, pending_of, publish

Events = Callable[[str], list[logging.LogRecord]]
#: Idle time given to the holder's entries: past every claim threshold of the test timings.
LONG_IDLE_MS = 60_000


def _held_by(client: RedisClient, keys: StreamKeys, holder: str, count: int) -> list[str]:
    """Publish ``count`` messages and leave them pending on ``holder``, long idle."""
    ensure_group(client, keys)
    ids = publish(client, keys, [{"key": f"{holder}-{n}"} for n in range(count)])
    client.xreadgroup(keys.group, holder, {keys.stream: ">"}, count=count)
    held: list[Any] = list(ids)
    client.xclaim(keys.stream, keys.group, holder, 0, held, idle=LONG_IDLE_MS, justid=True)
    client.hset(keys.consumers, holder, '{"pid": 1}')  # registered, as every worker is
    return ids


def test_a_dead_consumers_messages_are_recovered_and_committed_once(
    redis_client: RedisClient, tx_keys: StreamKeys, make_consumer: MakeConsumer, events: Events
) -> None:
    ids = _held_by(redis_client, tx_keys, "dead", 3)  # its lease expired: no lease key

    survivor = make_consumer("survivor")
    assert survivor.run(burst=True) == 0

    results: Any = redis_client.xrange(tx_keys.results)
    assert sorted(f["source_message_id"] for _id, f in results) == sorted(ids)
    assert redis_client.hgetall(CALLS_KEY) == {f"dead-{n}": "1" for n in range(3)}
    assert survivor.totals.recovered == 3 and survivor.totals.read == 0
    recovered = events("recovered")
    assert sorted(r.__dict__["message_id"] for r in recovered) == sorted(ids)
    assert {r.__dict__["claimed_from"] for r in recovered} == {"dead"}
    assert pending_of(redis_client, tx_keys, "dead") == 0
    summary: Any = redis_client.xpending(tx_keys.stream, tx_keys.group)
    assert summary["pending"] == 0


def test_a_live_consumers_messages_are_never_taken_however_idle(
    redis_client: RedisClient, tx_keys: StreamKeys, make_consumer: MakeConsumer
) -> None:
    ids = _held_by(redis_client, tx_keys, "live", 3)
    redis_client.set(tx_keys.lease("live"), "elsewhere:1:token", px=LONG_IDLE_MS)

    other = make_consumer("other")
    assert other.run(burst=True) == 0  # returns: nothing it may claim

    assert other.totals.recovered == 0
    assert redis_client.xlen(tx_keys.results) == 0
    assert not redis_client.exists(CALLS_KEY)
    pending: Any = redis_client.xpending_range(tx_keys.stream, tx_keys.group, "-", "+", 10)
    assert sorted(p["message_id"] for p in pending) == sorted(ids)
    assert {p["consumer"] for p in pending} == {"live"}
    assert other.metrics.snapshot()["skipped_alive"] == 3


def test_a_trimmed_message_leaves_no_attempt_record(
    redis_client: RedisClient, tx_keys: StreamKeys, make_consumer: MakeConsumer, events: Events
) -> None:
    [message_id] = publish(redis_client, tx_keys, [{"key": "doomed", "poison": "1"}])
    consumer = make_consumer(block_ms=0)
    consumer.start()
    assert one_batch(consumer).failed == 1
    assert records_of(redis_client, tx_keys, message_id)  # its last error

    redis_client.xdel(tx_keys.stream, message_id)  # trimmed while pending (MAXLEN, XDEL)
    assert consumer.run(burst=True) == 0

    [trimmed] = events("trimmed")
    assert trimmed.__dict__["message_id"] == message_id
    summary: Any = redis_client.xpending(tx_keys.stream, tx_keys.group)
    assert summary["pending"] == 0
    assert records_of(redis_client, tx_keys, message_id) == []
