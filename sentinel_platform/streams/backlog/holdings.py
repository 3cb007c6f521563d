"""What the workers hold in flight, as each one publishes it: the fleet's in-flight allowance.

A worker holds messages it has read and not yet acknowledged (its part of the group's
pending count). How many depends on how it runs: calls made inline (a concurrency of 1)
hold a whole read (``SENTINEL_READ_COUNT``); slow calls on threads hold as many as the
worker has threads and a read-ahead of half that (:func:`read_ahead_size`), never more
than the larger of the two and a read; and a limit that changes at run time holds what
it is now. No formula over the settings can
know the last case, so each worker *publishes* the most it may hold now (its limit in
force) and readers add up what the live workers published. That sum is the in-flight
allowance of :mod:`~sentinel_platform.streams.backlog.zones`: lag up to it is work in hand,
never pressure.

Storage, cluster-safe and for Redis 7.0+ (a hash with per-field expiry needs 7.4):

* ``holding_key(keys, consumer)``: the consumer's figure, a plain integer written with
  ``SET ... EX ttl`` beside the lag key, with the lag key's TTL. The server's clock
  expires it, so a worker that dies stops counting within that TTL whatever the hosts'
  clocks say, like the lag key it is written with.
* ``holdings_key(keys)``: the consumers that published (a sorted set, every score 0:
  the documented least-privilege ACL has ``+@sortedset``, not ``+@set``), so a reader
  finds the figures without scanning. It expires with the last writer; names whose figure has
  expired are pruned by the readers (one script that checks and removes atomically, so a
  worker publishing again at that moment is never dropped).

Both names derive from the lag key (:mod:`~sentinel_platform.streams.plumbing.keys`), so
on a cluster they share the stream's hash slot. The lag key itself stays Sentinel-L7's
plain integer; nothing here is ever written into it.

A worker whose adaptive limit is still climbing (``auto`` from its start) says so beside
its figure (``climbing_key``, same TTL): what it holds now is not what it will take, so
the zones do not call the lag its limit has not reached yet backpressure.

With no live worker nothing is published and the allowance is 0: everything pending is
pressure (and the zone is ``worker_off`` anyway while no worker writes the lag key).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import redis

from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import (
    StreamKeys,
    climbing_key,
    holding_key,
    holdings_key,
)
from sentinel_platform.streams.plumbing.scripts import LuaScript

#: The part of its limit a worker with slow calls reads ahead of its free runs
#: (``Calls.room``), so that one read serves many finished calls. Half, as Dramatiq's
#: prefetch of twice its threads is a whole limit: a read then serves half a limit of
#: finished calls, while a worker of a fleet holds little its neighbours could have taken.
READ_AHEAD = 0.5

#: Removes, atomically, the names (ARGV) of the index (KEYS[1]) whose figure (KEYS[i+1])
#: is gone: a name published again meanwhile still has its figure and stays.
PRUNE_HOLDINGS = LuaScript(
    "prune_holdings",
    """
local removed = 0
for i, name in ipairs(ARGV) do
  if redis.call('EXISTS', KEYS[i + 1]) == 0 then
    removed = removed + redis.call('ZREM', KEYS[1], name)
  end
end
return removed
""",
)


def read_ahead_size(limit: int, read_count: int) -> int:
    """How many messages a worker with slow calls holds beyond its ``limit`` of calls:
    :data:`READ_AHEAD` of the limit, never past the larger of the limit and a read (so a
    limit of one holds one message, and ``auto`` capped at a read holds at most a read)."""
    return max(0, min(int(limit * READ_AHEAD), read_count - limit))


def most_held(read_count: int, concurrency: int) -> int:
    """The most messages one worker holds at once with a pinned concurrency: its whole
    read when calls run inline (``concurrency`` 1), else ``concurrency`` and the read-ahead
    of slow calls (:func:`read_ahead_size`). What such a worker publishes, and what a
    start-up check can know before any worker runs."""
    if concurrency < 1 or read_count < 1:
        raise ValueError(f"read_count ({read_count}) and concurrency ({concurrency}) must be >= 1")
    if concurrency == 1:
        return read_count
    return concurrency + read_ahead_size(concurrency, read_count)


def queue_holding(
    pipe: Any, keys: StreamKeys, consumer: str, limit: int, ttl_s: int, climbing: bool = False
) -> None:
    """Queue on ``pipe`` (plain or cluster pipeline, no extra round trip) that ``consumer``
    may hold ``limit`` messages now, for ``ttl_s`` seconds (the lag key's TTL: a worker
    that stops writing stops counting when its lag report would lapse too), and whether
    its limit is still ``climbing``."""
    if limit < 0:
        raise ValueError(f"limit ({limit}) must not be negative")
    if ttl_s < 1:
        raise ValueError(f"ttl_s ({ttl_s}) must be at least 1")
    index = holdings_key(keys)
    pipe.set(holding_key(keys, consumer), int(limit), ex=ttl_s)
    if climbing:
        pipe.set(climbing_key(keys, consumer), 1, ex=ttl_s)
    else:
        pipe.delete(climbing_key(keys, consumer))
    pipe.zadd(index, {consumer: 0})  # after the figure: a concurrent prune never drops it
    # the index lives as long as its longest-lived figure: never shortened by a writer
    # with a shorter TTL (NX sets it on a new index, GT only ever lengthens it)
    pipe.expire(index, ttl_s, nx=True)
    pipe.expire(index, ttl_s, gt=True)


def publish_holding(
    client: RedisClient, keys: StreamKeys, consumer: str, limit: int, ttl_s: int
) -> None:
    """:func:`queue_holding` sent on its own (one round trip)."""
    pipe = client.pipeline(transaction=False)
    queue_holding(pipe, keys, consumer, limit, ttl_s)
    pipe.execute()


def queue_forget_holding(pipe: Any, keys: StreamKeys, consumer: str) -> None:
    """Queue the removal of ``consumer``'s figure: a worker that stops cleanly no longer
    counts at once, rather than after the TTL."""
    pipe.delete(holding_key(keys, consumer), climbing_key(keys, consumer))
    pipe.zrem(holdings_key(keys), consumer)


@dataclass(frozen=True)
class Holdings:
    """What each live worker published (consumer name -> messages it may hold)."""

    by_consumer: Mapping[str, int] = field(default_factory=dict)
    #: The live workers whose adaptive limit is still climbing.
    climbing: frozenset[str] = frozenset()

    @property
    def allowance(self) -> int:
        """The fleet's in-flight allowance: the sum over the live workers (0: none)."""
        return sum(self.by_consumer.values())


def read_holdings(client: RedisClient, keys: StreamKeys) -> Holdings:
    """The figures of the live workers (two round trips; a third, rare, to prune the
    names of workers whose figure expired). A figure that is not an integer counts as
    nothing. A user without write access reads the same figures, unpruned."""
    members = client.zrange(holdings_key(keys), 0, -1)
    names = [_text(name) for name in members if isinstance(name, (str, bytes))]
    if not names:
        return Holdings()
    figures = [holding_key(keys, name) for name in names]
    values = client.mget([*figures, *(climbing_key(keys, name) for name in names)])
    climbing = frozenset(
        name for name, flag in zip(names, values[len(names) :], strict=True) if flag is not None
    )
    live: dict[str, int] = {}
    gone: list[str] = []
    for name, value in zip(names, values[: len(names)], strict=True):
        if value is None:
            gone.append(name)
            continue
        with contextlib.suppress(ValueError):
            live[name] = max(0, int(_text(value)))
    if gone:
        _prune(client, keys, gone)
    return Holdings(live, climbing & live.keys())


def read_allowance(client: RedisClient, keys: StreamKeys) -> int:
    """The fleet's in-flight allowance now: what the live workers published, summed."""
    return read_holdings(client, keys).allowance


def _prune(client: RedisClient, keys: StreamKeys, names: list[str]) -> None:
    figures = [holding_key(keys, name) for name in names]
    with contextlib.suppress(redis.ResponseError):  # read-only user: the TTL still applies
        PRUNE_HOLDINGS.run(client, [holdings_key(keys), *figures], names)


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value
