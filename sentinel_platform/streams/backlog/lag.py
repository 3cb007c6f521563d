"""Consumer lag as it really is: backlog (never delivered) plus pending (delivered, unacked).

XPENDING alone misses the undelivered backlog, and backpressure driven by it would
rarely fire. The group's own numbers are used instead (Redis 7.0+ / Valkey): one
pipeline of ``XINFO GROUPS`` and ``XLEN`` gives ``pending`` and ``lag`` in O(1).

The server reports ``lag`` as nil when an entry after the group's last-delivered id was
deleted (``XDEL``), and keeps doing so until the group reaches the end of the stream (its
read counter is lost on the first read past the tombstone and only found again at the
last entry; Redis 7.0). Then the backlog is counted, exactly and inside the server (one
Lua call, no entry crosses the network), on the cheaper side of the group's position:
the entries after it, or the stream length minus the entries up to it, chosen from the
group's last known read counter. The count is never capped, so a large backlog is
reported as it is.

Such a count is *remembered* in the stream's slot (``<lag key>:counted``, a hash with a
short TTL, shared by every process measuring the stream) and later measurements derive
from it, usually counting a single page of what the group read since; when to trust the
remembered count and how to move it is the pure
:mod:`~sentinel_platform.streams.backlog.lag_baseline`, which also states the staleness
bound. One process recounts: a claim key ``<lag key>:counting`` with a TTL of
:data:`~sentinel_platform.streams.backlog.lag_baseline.RECOUNT_INTERVAL_S`.

Entries trimmed before the group read them are counted by ``lag`` but no longer exist;
the backlog is therefore never more than the stream's length.

Workers publish the figure to ``sentinel:consumer_lag:<stream>`` (a plain integer, as
Sentinel-L7's producers expect) with a short TTL; a missing key means no worker is alive.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import redis

from sentinel_platform.streams.backlog.lag_baseline import (
    RECOUNT_INTERVAL_S,
    CountBaseline,
    StreamSnapshot,
    counted_baseline,
    derive_baseline,
    plan_count,
)
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform.streams.plumbing.scripts import LuaScript

#: The lag zones; judged by :func:`~sentinel_platform.streams.backlog.zones.zone`, the one
#: definition.
Zone = Literal["nominal", "elevated", "backpressure", "worker_off"]
#: Entries fetched per XRANGE page inside the counting script.
COUNT_PAGE = 1000
#: A remembered count nobody used for this long expires: the next measurement counts,
#: rather than derive from a position the group left long ago (a count of all it read).
BASELINE_TTL_MS = 5000

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


def baseline_key(keys: StreamKeys) -> str:
    """The remembered count of the stream's backlog (a hash, in the stream's slot)."""
    return f"{keys.lag}:counted"


def recount_claim_key(keys: StreamKeys) -> str:
    """Held for :data:`RECOUNT_INTERVAL_S` by the process that recounts the backlog."""
    return f"{keys.lag}:counting"


def _counted_backlog(client: RedisClient, keys: StreamKeys, state: GroupState) -> int:
    """The exact backlog after ``state``'s position (``entries_added`` set), counted in the
    server on the cheaper side of it."""
    last = state.last_delivered_id
    if count_side(state) == "after":
        return int(COUNT_RANGE.run(client, [keys.stream], [f"({last}", "+", COUNT_PAGE]))
    behind = int(COUNT_RANGE.run(client, [keys.stream], ["-", last, COUNT_PAGE]))
    return max(0, state.length - behind)


def _claim_recount(client: RedisClient, keys: StreamKeys) -> bool:
    """Whether this process recounts now (no other did within the interval)."""
    try:
        won = client.set(recount_claim_key(keys), "1", nx=True, px=int(RECOUNT_INTERVAL_S * 1000))
    except redis.ResponseError:  # a read-only user or replica: use the shared baseline
        return False
    return bool(won)


def _remember(client: RedisClient, keys: StreamKeys, baseline: CountBaseline) -> None:
    pipe = client.pipeline(transaction=False)
    fields: Mapping[Any, Any] = baseline.to_hash()  # redis-py's stubs want its key union
    pipe.hset(baseline_key(keys), mapping=fields)
    pipe.pexpire(baseline_key(keys), BASELINE_TTL_MS)
    with contextlib.suppress(redis.ResponseError):  # a read-only user: measuring still works
        pipe.execute()


def _nil_lag_backlog(
    client: RedisClient, keys: StreamKeys, clock: Callable[[], float]
) -> int | None:
    """The backlog while the server's ``lag`` is nil: derived from the remembered count,
    or counted (and remembered). None when the group or the stream has gone meanwhile."""
    pipe = client.pipeline(transaction=False)
    pipe.hgetall(baseline_key(keys))  # first: its position is not ahead of the group's
    pipe.xinfo_groups(keys.stream)
    pipe.xinfo_stream(keys.stream)
    try:
        stored, groups, info = pipe.execute()
    except redis.ResponseError:
        return None
    group = next((g for g in groups if g["name"] == keys.group), None)
    if group is None:
        return None
    read = group.get("entries-read")
    state = GroupState(
        length=int(info["length"]),
        pending=int(group.get("pending", 0)),
        lag=group.get("lag"),
        last_delivered_id=str(group.get("last-delivered-id", "0-0")),
        entries_read=None if read is None else int(read),
        entries_added=int(info["entries-added"]),
    )
    backlog = backlog_from_state(state)
    if backlog is not None:  # the group reached the end of the stream meanwhile
        return backlog
    first = info.get("first-entry")
    snapshot = StreamSnapshot(
        last_delivered_id=state.last_delivered_id,
        length=state.length,
        entries_added=int(info["entries-added"]),
        first_id=str(first[0]) if first else None,
        max_deleted_id=str(info.get("max-deleted-entry-id", "0-0")),
    )
    baseline = CountBaseline.from_hash(stored) if stored else None
    plan = plan_count(baseline, snapshot, clock())
    if plan == "recount" and not _claim_recount(client, keys):
        plan = "derive"
    if plan == "derive" and baseline is not None:
        progress = 0
        if snapshot.last_delivered_id != baseline.last_delivered_id:
            bounds = [f"({baseline.last_delivered_id}", snapshot.last_delivered_id, COUNT_PAGE]
            progress = int(COUNT_RANGE.run(client, [keys.stream], bounds))
        remembered = derive_baseline(baseline, snapshot, progress)
    else:
        remembered = counted_baseline(snapshot, _counted_backlog(client, keys, state), clock())
    _remember(client, keys, remembered)
    return remembered.backlog


def measure_lag(
    client: RedisClient, keys: StreamKeys, clock: Callable[[], float] = time.time
) -> LagReading:
    """The group's lag: one round trip when the server reports it; otherwise a second one
    and, usually, one count of what the group read since the last measurement (exact, or
    within the staleness bound of the module docstring). ``clock``: epoch seconds.

    Server cost of a nil ``lag``: per stream, at most one exact count per
    :data:`RECOUNT_INTERVAL_S` (plus one per process that measures first in an episode,
    or after :data:`BASELINE_TTL_MS` without a measurement); otherwise O(entries read
    since the previous measurement). Writes only the remembered count and the recount
    claim; a read-only user measures without them.
    """
    state = _group_state(client, keys)
    if state is None:
        return LagReading(0, 0)
    if isinstance(state, int):
        return LagReading(backlog=state, pending=0)  # no group yet: everything is backlog
    backlog = backlog_from_state(state)
    if backlog is None:
        backlog = _nil_lag_backlog(client, keys, clock)
        if backlog is None:  # the group or the stream went away between the round trips
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


def whole_stream_lag(base: int, shards: Sequence[int]) -> int:
    """A sharded stream's lag as its producers and its zone judge it: the base key's
    backlog plus the shards' lag, or N times the worst shard's when that is more.

    The workers give each shard an even share of their limit, so a shard drains at about
    1/N of the stream's rate and holds N x its lag / the stream's rate seconds of work:
    the stream is as late as its latest shard, and a hot shard cannot hide behind cold
    ones. With no shards given it is ``base``: a stream of one shard, as it is.
    """
    if not shards:
        return base
    return base + max(sum(shards), len(shards) * max(shards))
