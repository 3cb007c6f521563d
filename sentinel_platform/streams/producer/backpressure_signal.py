"""One reading of everything the producer's guard looks at, in one pipelined round trip.

The group's state (``XINFO GROUPS``: backlog, pending, ``entries-read``), the lag key the
workers publish, the operators' pause flag, the run's stop key, the drain rate last
published and the producers seen lately are read together, so every figure of a
:class:`Signal` is of the same moment and a step costs one round trip.

**Lag is measured, the published figure can only stop.** The group's own numbers are
current to the round trip, so the producer never paces on a stale figure (workers write
the lag key once per read cycle, which may be a second old). A published figure
(Sentinel-L7's lag key) at or above the level that holds (``holds``: the stop, or the
resume level while a lag-driven stop lasts) still counts, so whatever writes it can hold
producers. Without a group the whole stream counts as backlog.

**A sharded stream is measured whole.** With its shards given, every shard's group is read
in the same round trip (one pipeline: on a cluster redis-py sends each master its part)
and the lag is ``backlog.lag.whole_stream_lag``: the base key's backlog plus the shards'
lag, or N times the worst shard's when that is more, so one hot shard cannot hide behind
cold ones. The producer then slows the whole stream, not the hot shard's rows alone: rows
go to their key's shard, and holding back one shard's rows would mean buffering them on
the executor without bound. The drain is the shards' completions summed (the base key's
are forwards, already counted on the shards).

Each reading also marks this producer alive (:func:`producers_key`), so producers sharing
a stream each count the others and take their share of the rate.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis

from sentinel_platform.streams.backlog.drain import completed_count, parse_rate
from sentinel_platform.streams.backlog.lag import (
    GroupState,
    backlog_from_state,
    measure_lag,
    whole_stream_lag,
)
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, drain_rate_key

#: A producer that has not observed the stream for this long no longer counts for a share.
PRODUCER_TTL_S = 5.0
_FALSE_FLAGS = frozenset({"", "0", "false", "no", "off"})


@dataclass(frozen=True)
class Signal:
    """One reading of everything the guard looks at (one pipelined round trip)."""

    lag: int
    entries_read: int | None
    paused_flag: bool
    stop: bool
    producers: int = 1
    #: The group's finished count (read minus pending), for the drain rate.
    completed: int | None = None
    #: The drain rate another producer (or this one) published, rows/s.
    published_rate: float | None = None


def producers_key(keys: StreamKeys) -> str:
    """Producers that observed the stream lately (member: producer id, score: ms)."""
    return f"{keys.lag}:producers"


def read_signal(
    client: RedisClient,
    keys: StreamKeys,
    stop_key: str | None,
    producer_id: str,
    holds: int,
    shards: Sequence[StreamKeys] = (),
) -> Signal:
    """Read the stream's state and flags at once; a published lag counts from ``holds`` on.
    With ``shards``, each shard's group is read too and the stream is measured whole."""
    pipe = client.pipeline(transaction=False)
    pipe.get(keys.lag)
    pipe.get(keys.paused)
    pipe.get(stop_key or keys.paused)
    pipe.get(drain_rate_key(keys))
    for measured_keys in (keys, *shards):
        pipe.xinfo_groups(measured_keys.stream)
        pipe.xlen(measured_keys.stream)
    _register(pipe, keys, producer_id)
    values = pipe.execute(raise_on_error=False)
    lag_key, paused_value, stop_value, rate_value = values[:4]
    streams = values[4 : 6 + 2 * len(shards)]
    for value in values[6 + 2 * len(shards) :]:
        if isinstance(value, Exception):
            raise value
    stop = bool(stop_key and stop_value is not None)
    measured, entries_read, pending = _measure_all(client, keys, shards, streams)
    published = int(lag_key) if lag_key is not None else 0
    lag = max(measured, published) if published >= holds else measured
    paused = paused_value is not None and str(paused_value).strip().lower() not in _FALSE_FLAGS
    producers = max(1, int(values[-2]))
    published_rate = None if isinstance(rate_value, Exception) else parse_rate(rate_value)
    completed = completed_count(entries_read, pending)
    return Signal(lag, entries_read, paused, stop, producers, completed, published_rate)


def _measure_all(
    client: RedisClient, keys: StreamKeys, shards: Sequence[StreamKeys], replies: list[Any]
) -> tuple[int, int | None, int]:
    """The stream's lag, ``entries-read`` and pending: its own group's, or with shards
    :func:`whole_stream_lag` and the shards' reads and pending summed."""
    base = _measure(client, keys, replies[0], replies[1])
    if not shards:
        return base
    each = [
        _measure(client, shard, replies[2 + 2 * k], replies[3 + 2 * k])
        for k, shard in enumerate(shards)
    ]
    reads = [read for _lag, read, _pending in each if read is not None]
    lag = whole_stream_lag(base[0], [shard_lag for shard_lag, _read, _pending in each])
    return lag, sum(reads) if reads else None, sum(pending for _lag, _read, pending in each)


def _register(pipe: Any, keys: StreamKeys, producer_id: str) -> None:
    """Mark this producer alive and count the live ones (the share of the rate)."""
    key = producers_key(keys)
    now_ms = int(time.time() * 1000)
    pipe.zadd(key, {producer_id: now_ms})
    pipe.zremrangebyscore(key, "-inf", now_ms - PRODUCER_TTL_S * 1000)
    pipe.zcard(key)
    pipe.pexpire(key, int(PRODUCER_TTL_S * 2000))


def _measure(
    client: RedisClient, keys: StreamKeys, groups: Any, length: Any
) -> tuple[int, int | None, int]:
    """Backlog + pending, ``entries-read`` and pending of the group (``XINFO GROUPS``)."""
    if isinstance(groups, redis.ResponseError):  # no stream yet
        return 0, None, 0
    if isinstance(groups, Exception):
        raise groups
    group: dict[str, Any] | None = next((g for g in groups if g["name"] == keys.group), None)
    if group is None:
        return int(length), None, 0
    read = group.get("entries-read")
    state = GroupState(
        length=int(length),
        pending=int(group.get("pending", 0)),
        lag=group.get("lag"),
        last_delivered_id=str(group.get("last-delivered-id", "0-0")),
        entries_read=None if read is None else int(read),
    )
    backlog = backlog_from_state(state)
    if backlog is None:  # an entry after the group's position was deleted: count
        return measure_lag(client, keys).lag, state.entries_read, state.pending
    return backlog + state.pending, state.entries_read, state.pending
