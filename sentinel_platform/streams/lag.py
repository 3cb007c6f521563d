"""Consumer lag as it really is: backlog (never delivered) plus pending (delivered, unacked).

XPENDING alone misses the undelivered backlog, and backpressure driven by it would
rarely fire. The group's own numbers are used instead (Redis 7.0+ / Valkey): one
pipeline of ``XINFO GROUPS`` and ``XLEN`` gives ``pending`` and ``lag`` in O(1).

The server reports ``lag`` as nil when an entry after the group's last-delivered id was
deleted (``XDEL``): its read counter can then no longer be derived. Only in that case the
backlog is counted, exactly and inside the server (one Lua call, no entry crosses the
network), on the cheaper side of the group's position: the entries after it, or the
stream length minus the entries up to it, chosen from the group's last known read
counter. The count is never capped, so a large backlog is reported as it is.

Entries trimmed before the group read them are counted by ``lag`` but no longer exist;
the backlog is therefore never more than the stream's length.

Workers publish the figure to ``sentinel:consumer_lag:<stream>`` (a plain integer, as
Sentinel-L7's producers expect) with a short TTL; a missing key means no worker is alive.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Literal

import redis

from sentinel_platform.streams.connection import RedisClient
from sentinel_platform.streams.keys import StreamKeys
from sentinel_platform.streams.scripts import LuaScript

Zone = Literal["nominal", "elevated", "backpressure", "worker_off"]
#: Entries fetched per XRANGE page inside the counting script.
COUNT_PAGE = 1000

#: Entries between two bounds (XRANGE syntax, ``(`` excludes), counted in the server.
COUNT_RANGE = LuaScript(
    "count_range",
    """
local cursor, last, page, n = ARGV[1], ARGV[2], tonumber(ARGV[3]), 0
while true do
  local entries = redis.call('XRANGE', KEYS[1], cursor, last, 'COUNT', page)
  n = n + #entries
  if #entries < page then return n end
  cursor = '(' .. entries[#entries][1]
end
""",
)


@dataclass(frozen=True)
class LagReading:
    backlog: int
    pending: int

    @property
    def lag(self) -> int:
        return self.backlog + self.pending


@dataclass(frozen=True)
class GroupState:
    """What ``XINFO GROUPS`` and ``XLEN`` say about one group (``lag`` may be None)."""

    length: int
    pending: int
    lag: int | None
    last_delivered_id: str
    entries_read: int | None
    entries_added: int | None = None


def count_side(state: GroupState) -> Literal["after", "before"]:
    """Which side of the group's position to count when ``lag`` is unknown.

    The group's last known read counter estimates how many entries are behind it;
    counting the smaller side bounds the work to half the stream.
    """
    if state.entries_read is None or state.entries_added is None:
        return "after"
    estimated_backlog = state.entries_added - state.entries_read
    return "after" if estimated_backlog <= state.length / 2 else "before"


def backlog_from_state(state: GroupState) -> int | None:
    """The backlog when the server's bookkeeping answers it; None when it must be counted."""
    if state.lag is None:
        return None
    return max(0, min(int(state.lag), state.length))


def _group_state(client: RedisClient, keys: StreamKeys) -> GroupState | int | None:
    """The group's state; the stream length when the group does not exist; None without stream."""
    pipe = client.pipeline(transaction=False)
    pipe.xinfo_groups(keys.stream)
    pipe.xlen(keys.stream)
    try:
        groups, length = pipe.execute()
    except redis.ResponseError:  # no such stream yet
        return None
    group = next((g for g in groups if g["name"] == keys.group), None)
    if group is None:
        return int(length)
    return GroupState(
        length=int(length),
        pending=int(group.get("pending", 0)),
        lag=group.get("lag"),
        last_delivered_id=group.get("last-delivered-id", "0-0"),
        entries_read=group.get("entries-read"),
    )


def _counted_backlog(client: RedisClient, keys: StreamKeys, state: GroupState) -> int:
    added = client.xinfo_stream(keys.stream).get("entries-added")
    state = replace(state, entries_added=None if added is None else int(added))
    last = state.last_delivered_id
    if count_side(state) == "after":
        return int(COUNT_RANGE.run(client, [keys.stream], [f"({last}", "+", COUNT_PAGE]))
    behind = int(COUNT_RANGE.run(client, [keys.stream], ["-", last, COUNT_PAGE]))
    return max(0, state.length - behind)


def measure_lag(client: RedisClient, keys: StreamKeys) -> LagReading:
    """The group's exact lag: one round trip, plus one in-server count when ``lag`` is nil."""
    state = _group_state(client, keys)
    if state is None:
        return LagReading(0, 0)
    if isinstance(state, int):
        return LagReading(backlog=state, pending=0)  # no group yet: everything is backlog
    backlog = backlog_from_state(state)
    if backlog is None:
        backlog = _counted_backlog(client, keys, state)
    return LagReading(backlog=backlog, pending=state.pending)


def write_lag_key(client: RedisClient, keys: StreamKeys, lag: int, ttl_s: int) -> None:
    queue_lag_key(client, keys, lag, ttl_s)


def queue_lag_key(target: Any, keys: StreamKeys, lag: int, ttl_s: int) -> None:
    """Write (on a client) or queue (on a pipeline) the lag key with its TTL."""
    target.set(keys.lag, int(lag), ex=ttl_s)


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
