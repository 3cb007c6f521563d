"""How many times a redelivered message was really handed to the processor, and its last error.

Redis' delivery count is not that number: a worker reads a batch (COUNT n), so when it is
killed every unprocessed message of the batch has been *delivered* once more without
being *processed*. Counting deliveries would dead-letter healthy messages that merely sat
in the tail of a few killed batches. So the loop records each processor call on a
*redelivered* message (delivery count > 1) before making it; first deliveries, the hot
path, are not recorded and are assumed to have been processed once. A message is
therefore handed to the processor at most ``SENTINEL_RECLAIM_DELIVERY_LIMIT`` times,
exactly that many times when it keeps failing, and a message that kills its worker every
time is still caught (the call is recorded before it is made).

Each message has its own record, the hash :func:`attempt_key` with the fields ``calls``
(recorded calls), ``delivery`` (the delivery count of the last recorded call) and
``err`` (the last exception). Two properties follow from that layout:

* **Recording is idempotent per delivery.** The client re-sends a command whose reply
  was lost (a socket timeout while Redis stalls), so a plain HINCRBY could land twice
  and push a healthy message to the delivery limit early. :data:`RECORD_CALL` counts a
  call only if its delivery count differs from the last one recorded; every delivery has
  a new count (XCLAIM bumps it), so a re-sent call changes nothing.
* **Every record expires on its own.** Records are deleted when the message is
  committed, dead-lettered or found trimmed; one that escapes all three (its entry
  acknowledged by an operator, a group destroyed) still expires after
  ``SENTINEL_IDEMPOTENCY_TTL_S``, however busy the stream: no other message's write
  refreshes its TTL.

Every record carries the stream's hash tag on a cluster (see ``keys.attempt_key_prefix``),
so the scripts that delete it with the stream's XACK stay in one slot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, attempt_key
from sentinel_platform.streams.plumbing.scripts import LuaScript

RECORD_CALL = LuaScript(
    "record_call",
    """
local record, delivery, ttl = KEYS[1], ARGV[1], ARGV[2]
if redis.call('HGET', record, 'delivery') == delivery then
  return tonumber(redis.call('HGET', record, 'calls'))
end
local calls = redis.call('HINCRBY', record, 'calls', 1)
redis.call('HSET', record, 'delivery', delivery)
redis.call('EXPIRE', record, ttl)
return calls
""",
)


@dataclass(frozen=True)
class AttemptRecord:
    calls: int = 0
    last_error: str | None = None


def read_attempts(
    client: RedisClient, keys: StreamKeys, ids: Sequence[str]
) -> dict[str, AttemptRecord]:
    """Records of ``ids`` (redelivered messages only, so never the hot path) in one pipeline."""
    if not ids:
        return {}
    pipe = client.pipeline(transaction=False)
    queue_read_attempts(pipe, keys, ids)
    return attempt_records(ids, pipe.execute())


def queue_read_attempts(pipe: Any, keys: StreamKeys, ids: Sequence[str]) -> None:
    """Queue the reads of the records of ``ids``, one command each, on ``pipe``."""
    for message_id in ids:
        pipe.hmget(attempt_key(keys, message_id), ["calls", "err"])


def attempt_records(ids: Sequence[str], replies: Sequence[Any]) -> dict[str, AttemptRecord]:
    """The records of ``ids`` from the replies of :func:`queue_read_attempts`."""
    return {
        message_id: AttemptRecord(int(calls or 0), error)
        for message_id, (calls, error) in zip(ids, replies, strict=True)
    }


def record_call(
    client: RedisClient, keys: StreamKeys, message_id: str, deliveries: int, ttl_s: int
) -> int:
    """Note the processor call of this delivery before it is made; the calls recorded so far.

    Safe to send twice: a second send for the same delivery counts nothing.
    """
    return int(RECORD_CALL.run(client, [attempt_key(keys, message_id)], [deliveries, ttl_s]))


def queue_error(pipe: Any, keys: StreamKeys, message_id: str, error: str, ttl_s: int) -> None:
    """Queue the last error of a failed call (reported in the dead letter if it dies)."""
    record = attempt_key(keys, message_id)
    pipe.hset(record, "err", error)
    pipe.expire(record, ttl_s)
