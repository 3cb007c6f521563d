"""Committing effects exactly once: result + marker + XACK in one atomic script.

A redelivered message (crash, recovery, lost reply) must never apply its effect twice,
so the effect, the idempotency marker of the message's natural key and the XACK commit
together inside one Lua call. For each message, in order:

* marker present: the natural key already had its effect (a redelivery, or a producer
  that published the same record twice) -> XACK only (``duplicate``);
* XACK acknowledges nothing: this delivery was already settled elsewhere (for example
  dead-lettered by another worker) -> no effect (``stale``);
* otherwise XADD to the result stream (capped), push the recent-feed list (capped),
  SET the marker with a TTL, and the XACK already done -> ``applied``.

One call commits a whole batch (not one call per message): the per-call cost of EVALSHA
dominated the worker's profile, and a batch is atomic just the same. Every key is passed
in KEYS and shares the stream's hash slot on a cluster (see ``keys.py``), so the script
is legal there too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sentinel_platform.streams.keys import StreamKeys, attempts_key
from sentinel_platform.streams.scripts import LuaScript

CommitStatus = Literal["applied", "duplicate", "stale"]
#: Most messages committed by one script call (bounds the call's length on the server).
COMMIT_CHUNK = 500

COMMIT_EFFECTS = LuaScript(
    "commit_effects",
    """
local stream, results, attempts, recent = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local group, maxlen, ttl, recent_size = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local statuses, pushed = {}, false
local a, k = 5, 5
while a <= #ARGV do
  local id, clear, recent_value, nfields = ARGV[a], ARGV[a + 1], ARGV[a + 2], tonumber(ARGV[a + 3])
  local marker = KEYS[k]
  local status
  -- SET NX is the existence check and the marker write in one command.
  if not redis.call('SET', marker, id, 'NX', 'EX', ttl) then
    redis.call('XACK', stream, group, id)
    status = 0
  elseif redis.call('XACK', stream, group, id) == 0 then
    redis.call('DEL', marker)
    status = -1
  else
    local fields = {}
    for i = a + 4, a + 3 + 2 * nfields do fields[#fields + 1] = ARGV[i] end
    redis.call('XADD', results, 'MAXLEN', '~', maxlen, '*', unpack(fields))
    if recent_value ~= '' and recent ~= stream then
      redis.call('LPUSH', recent, recent_value)
      pushed = true
    end
    status = 1
  end
  if clear == '1' then redis.call('HDEL', attempts, id, id .. ':err') end
  statuses[#statuses + 1] = status
  a = a + 4 + 2 * nfields
  k = k + 1
end
if pushed then redis.call('LTRIM', recent, 0, recent_size - 1) end
return statuses
""",
)

_STATUS: dict[int, CommitStatus] = {1: "applied", 0: "duplicate", -1: "stale"}


@dataclass(frozen=True)
class CommitLimits:
    """Caps and retention of one stream's effects (from settings)."""

    results_maxlen: int
    marker_ttl_s: int
    recent_size: int


@dataclass(frozen=True)
class CommitItem:
    """One message's effect, ready to commit."""

    message_id: str
    natural_key: str
    result: Mapping[str, str]
    recent: str | None = None
    clear_attempts: bool = False


def queue_commits(
    pipe: Any, keys: StreamKeys, items: Sequence[CommitItem], limits: CommitLimits
) -> int:
    """Queue the atomic commit of ``items`` on ``pipe``; the number of calls queued.

    Each call's reply is a list of statuses, one per item (see :func:`commit_statuses`).
    """
    calls = 0
    for start in range(0, len(items), COMMIT_CHUNK):
        chunk = items[start : start + COMMIT_CHUNK]
        # With no recent list configured, the stream key stands in (and is never written).
        script_keys = [keys.stream, keys.results, attempts_key(keys), keys.recent or keys.stream]
        args: list[object] = [
            keys.group,
            limits.results_maxlen,
            limits.marker_ttl_s,
            limits.recent_size,
        ]
        for item in chunk:
            if not item.result:
                raise ValueError(f"effect of {item.message_id} has no result fields")
            script_keys.append(keys.marker(item.natural_key))
            args += [
                item.message_id,
                "1" if item.clear_attempts else "0",
                item.recent or "",
                len(item.result),
            ]
            for name, value in item.result.items():
                args += [name, value]
        COMMIT_EFFECTS.queue(pipe, script_keys, args)
        calls += 1
    return calls


def queue_commit(
    pipe: Any,
    keys: StreamKeys,
    message_id: str,
    natural_key: str,
    result: Mapping[str, str],
    recent: str | None,
    limits: CommitLimits,
    clear_attempts: bool = False,
) -> None:
    """Queue the commit of a single effect (one call; its reply holds one status)."""
    item = CommitItem(message_id, natural_key, result, recent, clear_attempts)
    queue_commits(pipe, keys, [item], limits)


def commit_statuses(reply: Any) -> list[CommitStatus]:
    """Read one script reply: a status per committed item, in order."""
    return [_STATUS[int(code)] for code in reply]
