"""Committing effects exactly once: result + marker + XACK in one atomic script.

A redelivered message (crash, recovery, lost reply) must never apply its effect twice,
so the effect, the idempotency marker of the message's natural key and the XACK commit
together inside one Lua call. For each message, in order:

* the message is no longer pending: this delivery was already settled elsewhere (for
  example dead-lettered by another worker) -> nothing (``stale``);
* the marker cannot be set (``SET NX``: it is there): the natural key already had its
  effect (a redelivery, or a producer that published the same record twice) -> XACK
  only (``duplicate``);
* otherwise, the marker now set with its TTL, XADD to the result stream (capped), push
  the recent-feed list (capped), XACK -> ``applied``; an item with a re-screen queue
  entry (a provisional verdict, ``CommitItem.queue``) also XADDs it to the stream's
  re-screen queue (``StreamKeys.rescreen``) with the result's entry id
  (``sentinel_rescreen_of``) and the message's (``sentinel_source_id``), so a verdict is
  provisional and queued in one step or neither. An item without one costs nothing more:
  a flag bit tells, and no command runs for it.

Either way the key's in-flight claim, if the item names one (``claims.py``), is deleted
with the call: the marker answers for the key from then on, so a claim left to lapse by
its TTL would only cost the server memory and an expiry per message.

Redis does not roll back a script that fails half-way, so the order is chosen for that.
The key types the writes depend on are checked before the first write. Memory is the
other failure, and Redis checks it only until a script's first write: once a script has
written, its later writes are let through. The first write of a call is therefore a
message's marker (``SET NX``): a call that fails on memory fails there and changes
nothing, and its retry applies the effect instead of reporting a ``duplicate`` of an
effect that was never written.

Each message would cost five commands inside the script; the per-command overhead of a
script, not the commands' own work, dominated the server's time. So the pending check of
the whole call is one ranged XPENDING when its ids lie close together (a batch read at
once; per-id checks otherwise), the marker's check is its ``SET NX``, and the call's
acknowledgements are one XACK and its recent entries one LPUSH at the end. Two commands
per message remain: SET and XADD.

Effects are checked before they are queued
(:func:`~sentinel_platform.streams.consumer.processor.check_effect`): a value the client
cannot send (``None``, a bool, a nested mapping) is the processor's bug, reported like
any processor failure, never an exception out of the commit.

One call commits a whole batch (not one call per message): the per-call cost of EVALSHA
dominated the worker's profile, and a batch is atomic just the same. Every key is passed
in KEYS and shares the stream's hash slot on a cluster (see ``keys.py``), so the script
is legal there too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from sentinel_platform.streams.consumer.processor import InvalidEffectError
from sentinel_platform.streams.plumbing.keys import StreamKeys, attempt_key
from sentinel_platform.streams.plumbing.scripts import WRONG_TYPE_CHECK, LuaScript

CommitStatus = Literal["applied", "duplicate", "stale"]
#: Most messages committed by one script call (bounds the call's length on the server).
COMMIT_CHUNK = 500

COMMIT_EFFECTS = LuaScript(
    "commit_effects",
    WRONG_TYPE_CHECK
    + """
local stream, results, recent, queue = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local group, maxlen, ttl, recent_size = ARGV[1], ARGV[2], ARGV[3], tonumber(ARGV[4])
local bad = wrong_type(results, 'stream') or (recent ~= stream and wrong_type(recent, 'list'))
if bad then return bad end
-- Which ids are still pending: one range query when they lie close together (a batch
-- read at once), else one query per id. The ranged answer is exact when it is not full.
local ids, low, high, lm, ls, hm, hs = {}, nil, nil, 0, 0, 0, 0
local queues = false
local a = 5
while a <= #ARGV do
  local id = ARGV[a]
  local ms, seq = string.match(id, '^(%d+)-(%d+)$')
  ms, seq = tonumber(ms), tonumber(seq)
  if low == nil or ms < lm or (ms == lm and seq < ls) then low, lm, ls = id, ms, seq end
  if high == nil or ms > hm or (ms == hm and seq > hs) then high, hm, hs = id, ms, seq end
  ids[#ids + 1] = id
  local after = a + 4 + 2 * tonumber(ARGV[a + 3])
  if tonumber(ARGV[a + 1]) >= 4 then  -- a queue entry follows the result's fields
    queues = true
    after = after + 1 + 2 * tonumber(ARGV[after])
  end
  a = after
end
if queues and queue ~= stream then
  bad = wrong_type(queue, 'stream')
  if bad then return bad end
end
local pending = nil
if #ids > 1 then
  local limit = 2 * #ids
  local entries = redis.call('XPENDING', stream, group, low, high, limit)
  if #entries < limit then
    pending = {}
    for _, entry in ipairs(entries) do pending[entry[1]] = true end
  end
end
local statuses, acks, pushes, released = {}, {}, {}, {}
local k = 5
a = 5
while a <= #ARGV do
  local id, flags, recent_value = ARGV[a], tonumber(ARGV[a + 1]), ARGV[a + 2]
  local nfields = tonumber(ARGV[a + 3])
  local marker = KEYS[k]
  local claim = nil
  if flags % 4 >= 2 then
    claim = KEYS[k + 1]
    k = k + 1
  end
  local last = a + 3 + 2 * nfields
  local status, is_pending
  if pending then
    is_pending = pending[id]
  else
    is_pending = #redis.call('XPENDING', stream, group, id, id, 1) > 0
  end
  if not is_pending then
    status = -1
  elseif not redis.call('SET', marker, id, 'NX', 'EX', ttl) then
    acks[#acks + 1] = id
    status = 0
  else
    -- The marker first: the call's first write is the only one that can fail on memory.
    local written = redis.call(
      'XADD', results, 'MAXLEN', '~', maxlen, '*', unpack(ARGV, a + 4, last))
    if flags >= 4 and queue ~= stream then  -- a provisional verdict: its re-screen entry
      local entry = {unpack(ARGV, last + 2, last + 1 + 2 * tonumber(ARGV[last + 1]))}
      entry[#entry + 1] = 'sentinel_rescreen_of'
      entry[#entry + 1] = written
      entry[#entry + 1] = 'sentinel_source_id'
      entry[#entry + 1] = id
      redis.call('XADD', queue, '*', unpack(entry))
    end
    if recent_value ~= '' and recent ~= stream then
      pushes[#pushes + 1] = recent_value
    end
    acks[#acks + 1] = id
    status = 1
  end
  if claim and status >= 0 then
    released[#released + 1] = claim  -- the marker answers for the key from now on
  end
  if flags % 2 == 1 then
    redis.call('DEL', KEYS[k + 1])
    k = k + 1
  end
  statuses[#statuses + 1] = status
  a = last + 1
  if flags >= 4 then a = a + 1 + 2 * tonumber(ARGV[a]) end
  k = k + 1
end
-- One XACK for the call: after the first write nothing in it can fail on memory, so
-- the acknowledgements land with their markers all the same.
if #acks > 0 then redis.call('XACK', stream, group, unpack(acks)) end
if #released > 0 then redis.call('DEL', unpack(released)) end
-- One LPUSH for the call, in commit order (the newest first, as one push each would).
if #pushes > 0 then
  redis.call('LPUSH', recent, unpack(pushes))
  redis.call('LTRIM', recent, 0, recent_size - 1)
end
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


@dataclass(slots=True)
class CommitItem:
    """One message's effect, ready to commit."""

    message_id: str
    natural_key: str
    result: Mapping[str, str]
    recent: str | None = None
    clear_attempts: bool = False
    #: the key's in-flight claim (``claims.py``), deleted once the marker answers for it
    claim: str | None = None
    #: a provisional verdict's re-screen queue entry (``Effect.provisional``), added to
    #: ``StreamKeys.rescreen`` with the result's entry id only when the effect applies
    queue: Mapping[str, str] | None = None


def queue_commits(
    pipe: Any, keys: StreamKeys, items: Sequence[CommitItem], limits: CommitLimits
) -> int:
    """Queue the atomic commit of ``items`` on ``pipe``; the number of calls queued.

    Each call's reply is a list of statuses, one per item (see :func:`commit_statuses`).
    """
    calls = 0
    marker_prefix = keys.marker_prefix
    for start in range(0, len(items), COMMIT_CHUNK):
        chunk = items[start : start + COMMIT_CHUNK]
        # With no recent list or re-screen queue configured, the stream key stands in
        # (and is never written).
        script_keys = [
            keys.stream,
            keys.results,
            keys.recent or keys.stream,
            keys.rescreen or keys.stream,
        ]
        args: list[object] = [
            keys.group,
            limits.results_maxlen,
            limits.marker_ttl_s,
            limits.recent_size,
        ]
        for item in chunk:
            result = item.result
            if not result:  # an XADD without fields would fail the whole call
                raise InvalidEffectError(f"effect of {item.message_id} has no result fields")
            script_keys.append(marker_prefix + item.natural_key)
            if item.claim is not None:
                script_keys.append(item.claim)
            if item.clear_attempts:
                script_keys.append(attempt_key(keys, item.message_id))
            queue = item.queue
            flags = (2 if item.claim is not None else 0) + (1 if item.clear_attempts else 0)
            if queue:
                flags += 4
            args += (item.message_id, flags, item.recent or "")
            args.append(len(result))
            for name, value in result.items():
                args += (name, value)
            if queue:
                args.append(len(queue))
                for name, value in queue.items():
                    args += (name, value)
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
