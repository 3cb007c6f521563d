"""Committing an effect exactly once: result + marker + XACK in one atomic script.

A redelivered message (crash, recovery, lost reply) must never apply its effect twice,
so the effect, the idempotency marker of the message's natural key and the XACK commit
together in one Lua call:

* marker present: the natural key already had its effect (a redelivery, or a producer
  that published the same record twice) -> XACK only (``duplicate``);
* XACK acknowledges nothing: this delivery was already settled elsewhere (for example
  dead-lettered by another worker) -> no effect (``stale``);
* otherwise XADD to the result stream (capped), push the recent-feed list (capped),
  SET the marker with a TTL, and the XACK already done -> ``applied``.

Every key is passed in KEYS and shares the stream's hash slot on a cluster (see
``keys.py``), so the script is legal there too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from sentinel_platform.streams.keys import StreamKeys, attempts_key
from sentinel_platform.streams.scripts import LuaScript

CommitStatus = Literal["applied", "duplicate", "stale"]

COMMIT_EFFECT = LuaScript(
    "commit_effect",
    """
local function clear_attempts()
  if ARGV[7] == '1' then redis.call('HDEL', KEYS[4], ARGV[2], ARGV[2] .. ':err') end
end
if redis.call('EXISTS', KEYS[3]) == 1 then
  local acked = redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
  clear_attempts()
  return {0, acked}
end
if redis.call('XACK', KEYS[1], ARGV[1], ARGV[2]) == 0 then
  clear_attempts()
  return {-1, 0}
end
local fields = {}
for i = 8, #ARGV do fields[#fields + 1] = ARGV[i] end
local result_id = redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[3], '*', unpack(fields))
if ARGV[5] ~= '' and KEYS[5] then
  redis.call('LPUSH', KEYS[5], ARGV[5])
  redis.call('LTRIM', KEYS[5], 0, tonumber(ARGV[6]) - 1)
end
redis.call('SET', KEYS[3], ARGV[2], 'EX', ARGV[4])
clear_attempts()
return {1, result_id}
""",
)

_STATUS: dict[int, CommitStatus] = {1: "applied", 0: "duplicate", -1: "stale"}


@dataclass(frozen=True)
class CommitLimits:
    """Caps and retention of one stream's effects (from settings)."""

    results_maxlen: int
    marker_ttl_s: int
    recent_size: int


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
    """Queue the atomic commit of one effect on ``pipe`` (one EVALSHA, no round trip)."""
    script_keys = [keys.stream, keys.results, keys.marker(natural_key), attempts_key(keys)]
    if keys.recent:
        script_keys.append(keys.recent)
    args: list[object] = [
        keys.group,
        message_id,
        limits.results_maxlen,
        limits.marker_ttl_s,
        recent if (recent and keys.recent) else "",
        limits.recent_size,
        "1" if clear_attempts else "0",
    ]
    for name, value in result.items():
        args.extend((name, value))
    COMMIT_EFFECT.queue(pipe, script_keys, args)


def commit_status(reply: Any) -> CommitStatus:
    """Read the script's reply (``[status, detail]``)."""
    return _STATUS[int(reply[0])]
