"""The hand-back holder: what a stopping worker leaves its unprocessed messages with.

A worker that stops with messages in hand gives them to ``HANDBACK_CONSUMER`` (a name no
worker uses, so it never has a lease) with an idle time past every claim threshold, so
the next live worker claims them at once. Both marks are on purpose, so the delivery
check counts those messages apart (``handed_back``): never *idle* nor *orphaned*.

The workers prune dead consumers only among those they registered, and the hand-back
holder is never registered: once emptied it would stay listed in the group for good.
:func:`prune_handback` deletes it when it holds nothing and has been left alone for
``idle_bound_ms``. The pending count is read in the same script as the deletion
(:data:`PRUNE_HANDBACK`): read apart, a stop handing messages back between the read and
``XGROUP DELCONSUMER`` would lose them, since deleting a consumer drops its pending
entries from the group and nothing would ever deliver them again. The idle bound is no
safety margin (the script is atomic) but keeps a holder that was just used listed for a
while, where an operator looking at the group after a stop expects to see it.
"""

from __future__ import annotations

from typing import Literal

import redis

from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import HANDBACK_CONSUMER, StreamKeys
from sentinel_platform.streams.plumbing.scripts import LuaScript

__all__ = ["HANDBACK_CONSUMER", "PRUNE_HANDBACK", "PruneOutcome", "prune_handback"]

#: An empty hand-back holder left alone this long is pruned.
PRUNE_IDLE_MS = 60_000

#: KEYS[1] the stream. ARGV: the group, the holder, the idle bound (ms). Returns 1 pruned,
#: 0 no such consumer, -1 used within the bound, -2 it holds a message.
PRUNE_HANDBACK = LuaScript(
    "prune_handback",
    """
local held = redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1, ARGV[2])
if #held > 0 then return -2 end
for _, fields in ipairs(redis.call('XINFO', 'CONSUMERS', KEYS[1], ARGV[1])) do
  local info = {}
  for i = 1, #fields, 2 do info[fields[i]] = fields[i + 1] end
  if info['name'] == ARGV[2] then
    if tonumber(info['idle']) < tonumber(ARGV[3]) then return -1 end
    redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2])
    return 1
  end
end
return 0
""",
)

PruneOutcome = Literal["pruned", "absent", "recent", "holds"]
_OUTCOMES: dict[int, PruneOutcome] = {1: "pruned", 0: "absent", -1: "recent", -2: "holds"}


def prune_handback(
    client: RedisClient, keys: StreamKeys, idle_bound_ms: int = PRUNE_IDLE_MS
) -> PruneOutcome:
    """Delete the stream's hand-back holder from its group if it holds nothing and has
    been idle ``idle_bound_ms``; what happened. No stream or group yet: ``absent``."""
    try:
        done = PRUNE_HANDBACK.run(
            client, [keys.stream], [keys.group, HANDBACK_CONSUMER, idle_bound_ms]
        )
    except redis.ResponseError as exc:
        if "NOGROUP" in str(exc) or "no such key" in str(exc):
            return "absent"
        raise
    return _OUTCOMES[int(done)]
