"""Read-only inspection of a consumer group: leases, pending entries and dead letters.

Every function here does bounded work (a cap on entries and consumers), so a sensor tick
costs the same whether the PEL holds ten entries or ten million. Oldest pending entries
are looked at first: they are the ones most likely stuck.
"""

from __future__ import annotations

from dataclasses import dataclass

import redis

from sentinel_platform.registry import StreamSpec
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.drain import read_drain_rate
from sentinel_platform.streams.backlog.holdings import read_holdings
from sentinel_platform.streams.backlog.lag import (
    LagReading,
    measure_lag,
    read_lag_key,
    whole_stream_lag,
)
from sentinel_platform.streams.operators.dlq_import import IMPORTED_FROM_FIELD
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, keys_for
from sentinel_platform.streams.plumbing.replies import entries, pending_rows
from sentinel_platform.streams.sharding.shards import recorded_keys

#: Most pending entries examined per stream per call.
PENDING_SCAN_CAP = 1000
#: Most consumers whose lease is checked per stream per call.
CONSUMER_CAP = 500
#: Most dead letters read per call.
DLQ_READ_CAP = 500


@dataclass(frozen=True)
class PendingEntry:
    message_id: str
    consumer: str
    idle_ms: int
    deliveries: int


@dataclass(frozen=True)
class LagSnapshot:
    """What the lag card shows for one stream, read in a handful of round trips."""

    worker_lag: int | None  # the worker-written key; None = no recent report
    reading: LagReading  # the group's own backlog + pending
    consumers_alive: int
    #: The fleet's drain rate the producers measured (rows/s); None = none recently.
    drain_rate: float | None = None
    #: What the live workers published they hold in flight (streams.backlog.holdings).
    allowance: int = 0
    #: A live worker's adaptive limit is still climbing (streams.backlog.holdings).
    climbing: bool = False
    #: Each shard's lag, shard 0 first, for a sharded stream (:func:`stream_snapshot`).
    shard_lags: tuple[int, ...] = ()

    @property
    def lag(self) -> int:
        return self.reading.lag if self.worker_lag is None else self.worker_lag

    @property
    def zone_lag(self) -> int | None:
        """The lag the zone is judged on; None only when no worker is alive at all.

        A lag key that expired while a lease is still held means a worker busy with a
        slow message, not a dead fleet (nor a lag of 0): judge the group's own figure then
        instead of flapping into worker off. A sharded stream is judged on its latest
        shard when that is later than the whole, so one hot shard is not hidden.
        """
        if self.worker_lag is not None:
            lag: int | None = self.worker_lag
        else:
            lag = self.reading.lag if self.consumers_alive else None
        if lag is None or not self.shard_lags:
            return lag
        # a sharded stream is as late as its latest shard (backlog.lag.whole_stream_lag)
        return max(lag, whole_stream_lag(0, self.shard_lags))


@dataclass(frozen=True)
class DeadLetterEntry:
    entry_id: str
    fields: dict[str, str]

    @property
    def stream(self) -> str:
        return self.fields.get("stream", "?")

    @property
    def reason(self) -> str:
        return self.fields.get("reason", "?")

    @property
    def error(self) -> str:
        return self.fields.get("error", "")

    @property
    def imported(self) -> bool:
        """Restored by ``sentinel dlq import``: an old dead letter under a new id."""
        return IMPORTED_FROM_FIELD in self.fields


def fresh(entries: list[DeadLetterEntry]) -> list[DeadLetterEntry]:
    """The entries that are new dead letters: an imported entry was dead-lettered before
    its export (and alerted then), so a restore is no new failure to alert on."""
    return [entry for entry in entries if not entry.imported]


def registered_consumers(
    client: RedisClient, keys: StreamKeys, cap: int = CONSUMER_CAP
) -> list[str]:
    """Consumers the workers registered, plus those the group knows (bounded)."""
    names: set[str] = set()
    for name, _ in client.hscan_iter(keys.consumers, count=cap):
        names.add(name)
        if len(names) >= cap:
            break
    try:
        for consumer in client.xinfo_consumers(keys.stream, keys.group)[:cap]:
            names.add(consumer["name"])
    except redis.ResponseError:  # no stream or group yet
        pass
    return sorted(names)[:cap]


def live_consumers(client: RedisClient, keys: StreamKeys, names: list[str]) -> set[str]:
    """The subset of ``names`` holding a lease right now (lease key exists ⇔ alive)."""
    if not names:
        return set()
    pipe = client.pipeline(transaction=False)
    for name in names:
        pipe.exists(keys.lease(name))
    return {name for name, alive in zip(names, pipe.execute(), strict=True) if alive}


def lag_snapshot(client: RedisClient, keys: StreamKeys) -> LagSnapshot:
    names = registered_consumers(client, keys)
    holdings = read_holdings(client, keys)
    return LagSnapshot(
        worker_lag=read_lag_key(client, keys),
        reading=measure_lag(client, keys),
        consumers_alive=len(live_consumers(client, keys, names)),
        drain_rate=read_drain_rate(client, keys),
        allowance=holdings.allowance,
        climbing=bool(holdings.climbing),
    )


def stream_snapshot(client: RedisClient, settings: Settings, spec: StreamSpec) -> LagSnapshot:
    """:func:`lag_snapshot` of a declared stream; a sharded one as one stream: the lag its
    workers' forwarders write at the logical key, the base key's backlog with every
    shard's, the live workers those alive on every shard, the drain rates and holdings
    summed, climbing if any shard's limit climbs."""
    shards = recorded_keys(client, settings, spec)
    if len(shards) == 1:
        return lag_snapshot(client, shards[0])
    base = keys_for(settings, spec)
    parts = [lag_snapshot(client, keys) for keys in shards]
    readings = [measure_lag(client, base), *(part.reading for part in parts)]
    rates = [part.drain_rate for part in parts if part.drain_rate is not None]
    return LagSnapshot(
        worker_lag=read_lag_key(client, base),
        reading=LagReading(
            backlog=sum(r.backlog for r in readings), pending=sum(r.pending for r in readings)
        ),
        consumers_alive=min(part.consumers_alive for part in parts),
        drain_rate=sum(rates) if rates else None,
        allowance=sum(part.allowance for part in parts),
        climbing=any(part.climbing for part in parts),
        shard_lags=tuple(part.reading.lag for part in parts),
    )


def pending_by_consumer(client: RedisClient, keys: StreamKeys) -> dict[str, int]:
    """XPENDING summary: pending count per consumer (one round trip)."""
    try:
        summary = client.xpending(keys.stream, keys.group)
    except redis.ResponseError:
        return {}
    return {c["name"]: int(c["pending"]) for c in summary.get("consumers") or []}


def oldest_pending(client: RedisClient, keys: StreamKeys, consumers: list[str]) -> dict[str, str]:
    """Each consumer's oldest pending id (one pipelined XPENDING per consumer).

    Exact whatever other consumers hold, unlike the capped scan of :func:`scan_pending`:
    a consumer's oldest id moving on is the proof that it settles what it reads.
    """
    if not consumers:
        return {}
    pipe = client.pipeline(transaction=False)
    for consumer in consumers:
        pipe.xpending_range(
            keys.stream, keys.group, min="-", max="+", count=1, consumername=consumer
        )
    try:
        replies = pipe.execute()
    except redis.ResponseError:
        return {}
    return {
        consumer: rows[0]["message_id"]
        for consumer, reply in zip(consumers, replies, strict=True)
        if (rows := pending_rows(reply))
    }


def scan_pending(
    client: RedisClient, keys: StreamKeys, cap: int = PENDING_SCAN_CAP
) -> list[PendingEntry]:
    """The oldest ``cap`` pending entries with idle time and delivery count."""
    try:
        rows = pending_rows(
            client.xpending_range(keys.stream, keys.group, min="-", max="+", count=cap)
        )
    except redis.ResponseError:
        return []
    return [
        PendingEntry(
            message_id=row["message_id"],
            consumer=row["consumer"],
            idle_ms=int(row["time_since_delivered"]),
            deliveries=int(row["times_delivered"]),
        )
        for row in rows
    ]


def dlq_depth(client: RedisClient, dlq: str) -> int:
    try:
        return int(client.xlen(dlq))
    except redis.ResponseError:
        return 0


def last_dead_letter_id(client: RedisClient, dlq: str) -> str | None:
    rows = entries(client.xrevrange(dlq, max="+", min="-", count=1))
    return rows[0][0] if rows else None


def read_dead_letters(
    client: RedisClient, dlq: str, after_id: str, cap: int = DLQ_READ_CAP
) -> list[DeadLetterEntry]:
    """Dead letters strictly after ``after_id``, oldest first, at most ``cap``."""
    rows = entries(client.xrange(dlq, min=f"({after_id}", max="+", count=cap))
    return [DeadLetterEntry(entry_id, dict(fields)) for entry_id, fields in rows]


def recent_dead_letters(
    client: RedisClient, dlq: str, since_ms: int, cap: int = DLQ_READ_CAP
) -> list[DeadLetterEntry]:
    """Dead letters added at or after ``since_ms`` (their ids carry the time), at most ``cap``;
    entries restored by ``sentinel dlq import`` in that time are not recent dead letters."""
    rows = entries(client.xrevrange(dlq, max="+", min=f"{since_ms}-0", count=cap))
    return fresh([DeadLetterEntry(entry_id, dict(fields)) for entry_id, fields in reversed(rows)])
