"""Writing and reading the streams under test, as a producer or a finished worker would."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence

import redis

from sentinel_platform.schemas import Transaction
from sentinel_platform.streams.consumer.loop import Consumer, IterationReport
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.waits import WaitTimeout


def fill_stream(
    client: redis.Redis,
    stream: str,
    messages: Iterable[Mapping[str, str]],
    batch: int = 1000,
    atomic: bool = False,
) -> list[str]:
    """XADD every message with pipelining; returns the ids Redis acknowledged.

    ``atomic`` wraps each batch in MULTI/EXEC, so a reader blocked on the stream wakes
    once and sees the whole batch (otherwise it may wake after the first entry).
    """
    ids: list[str] = []
    pipe = client.pipeline(transaction=atomic)
    pending = 0
    for fields in messages:
        pipe.xadd(stream, dict(fields))
        pending += 1
        if pending >= batch:
            ids.extend(pipe.execute())
            pending = 0
    if pending:
        ids.extend(pipe.execute())
    return ids


def publish(
    client: RedisClient, keys: StreamKeys, messages: Sequence[Mapping[str, str]]
) -> list[str]:
    """XADD every message to the source stream of ``keys`` in one pipeline; their ids."""
    return fill_stream(client, keys.stream, messages, batch=max(1, len(messages)))


def read_and_ack(
    client: RedisClient, keys: StreamKeys, count: int, consumer: str = "c"
) -> list[str]:
    """Read up to ``count`` new entries as ``consumer`` of the group and acknowledge them.

    Stands in for a worker that has finished those entries; returns their ids, oldest first.
    """
    read = client.xreadgroup(keys.group, consumer, {keys.stream: ">"}, count=count)
    ids = [message_id for message_id, _fields in read[0][1]]
    client.xack(keys.stream, keys.group, *ids)
    return ids


def pending_of(client: RedisClient, keys: StreamKeys, consumer: str) -> int:
    """How many messages ``consumer`` holds (0 when the group or consumer is gone)."""
    try:
        summary = client.xpending(keys.stream, keys.group)
    except Exception:
        return 0
    return sum(int(c["pending"]) for c in summary.get("consumers") or [] if c["name"] == consumer)


def group_drained(client: redis.Redis, stream: str, group: str) -> bool:
    """Every entry delivered to the group and acknowledged (one round trip: a bench
    polls it while measuring the server's CPU)."""
    pipe = client.pipeline(transaction=False)
    pipe.xinfo_stream(stream)
    pipe.xinfo_groups(stream)
    try:
        info, groups = pipe.execute()
    except redis.ResponseError:
        return False
    mine = next((g for g in groups if g["name"] == group), None)
    if mine is None:
        return False
    return mine["pending"] == 0 and mine["last-delivered-id"] == info["last-generated-id"]


def undecided(client: redis.Redis, keys: StreamKeys, limit: int) -> set[str]:
    """The entry ids (up to ``limit`` pending) the group has not acknowledged: pending, or
    not yet delivered."""
    mine = next(g for g in client.xinfo_groups(keys.stream) if g["name"] == keys.group)
    pending = client.xpending_range(keys.stream, keys.group, "-", "+", limit)
    unread = client.xrange(keys.stream, min=f"({mine['last-delivered-id']}", max="+")
    return {p["message_id"] for p in pending} | {entry_id for entry_id, _ in unread}


def unacked(client: redis.Redis, stream: str, group: str) -> int:
    """Entries of the stream the group has not acknowledged (backlog + pending)."""
    groups = client.xinfo_groups(stream)
    mine = next(g for g in groups if g["name"] == group)
    backlog = mine.get("lag")
    if backlog is None:
        backlog = len(client.xrange(stream, min=f"({mine['last-delivered-id']}", max="+"))
    return int(backlog) + int(mine["pending"])


def sample_transaction(n: int) -> Transaction:
    """The ``n``-th of a series of valid transactions (odd ones ``suspicious``)."""
    return Transaction(
        id=f"txn-{n}",
        merchant=f"merchant-{n}",
        category="suspicious" if n % 2 else "grocery",
        currency="USD",
        amount=12.5 + n,
        message="weekly shop",
        source="test",
        timestamp="2026-11-21T10:00:00Z",
    )


def one_batch(consumer: Consumer, timeout_s: float = 30.0) -> IterationReport:
    """One pass of ``consumer``, plus the passes until the calls it started are settled:
    what a batch came to, however long its calls take on a loaded machine (a pass waits
    only a little for its calls: ``Consumer.iteration``)."""
    report = consumer.iteration()
    deadline = time.monotonic() + timeout_s
    while consumer.calls.running or len(consumer.outbox):
        if time.monotonic() > deadline:
            raise WaitTimeout(f"the batch's calls were not settled within {timeout_s}s")
        report += consumer.iteration()
    return report
