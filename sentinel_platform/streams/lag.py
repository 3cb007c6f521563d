"""Consumer lag as it really is: backlog (never delivered) plus pending (delivered, unacked).

The original measured XPENDING only, which misses the undelivered backlog, so its
backpressure rarely fired. Here the group's own numbers are used: XINFO GROUPS gives
``pending`` always and ``lag`` on Redis 7; where ``lag`` is unknown (Redis 6.2, or
after deletions) the backlog is counted with one bounded XRANGE after the group's
last-delivered id.

Workers publish the figure to ``sentinel:consumer_lag:<stream>`` (a plain integer, as
Sentinel-L7's producers expect) with a short TTL; a missing key means no worker is alive.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import redis

from sentinel_platform.streams.connection import RedisClient
from sentinel_platform.streams.keys import StreamKeys

Zone = Literal["nominal", "elevated", "backpressure", "worker_off"]
#: Most entries counted one by one on servers that do not report ``lag`` themselves.
BACKLOG_COUNT_CAP = 10_000


@dataclass(frozen=True)
class LagReading:
    backlog: int
    pending: int

    @property
    def lag(self) -> int:
        return self.backlog + self.pending


def _group_info(client: RedisClient, keys: StreamKeys) -> dict | None:
    try:
        groups = client.xinfo_groups(keys.stream)
    except redis.ResponseError:  # no such stream yet
        return None
    return next((g for g in groups if g["name"] == keys.group), None)


def _count_after(client: RedisClient, stream: str, last_id: str, cap: int) -> int:
    entries = client.xrange(stream, min=f"({last_id}", max="+", count=cap)
    return len(entries)


def measure_lag(client: RedisClient, keys: StreamKeys, cap: int = BACKLOG_COUNT_CAP) -> LagReading:
    """The group's lag from the server's own bookkeeping (about one round trip)."""
    group = _group_info(client, keys)
    if group is None:
        # No group yet: everything in the stream is backlog.
        try:
            return LagReading(backlog=int(client.xlen(keys.stream)), pending=0)
        except redis.ResponseError:
            return LagReading(0, 0)
    pending = int(group.get("pending", 0))
    lag = group.get("lag")
    if lag is not None:
        return LagReading(backlog=int(lag), pending=pending)
    last_id = group.get("last-delivered-id", "0-0")
    return LagReading(backlog=_count_after(client, keys.stream, last_id, cap), pending=pending)


def write_lag_key(client: RedisClient, keys: StreamKeys, lag: int, ttl_s: int) -> None:
    client.set(keys.lag, int(lag), ex=ttl_s)


def read_lag_key(client: RedisClient, keys: StreamKeys) -> int | None:
    """The worker-published lag, or None when no worker has written it recently."""
    value = client.get(keys.lag)
    return None if value is None else int(value)


def zone(lag: int | None, warn: int, pause: int) -> Zone:
    """The operator's lag card: nominal < warn <= elevated < pause <= backpressure."""
    if lag is None:
        return "worker_off"
    if lag >= pause:
        return "backpressure"
    if lag >= warn:
        return "elevated"
    return "nominal"
