"""Dead letters: the original message, why it died, moved to the DLQ atomically with its XACK.

The payload must survive its acknowledgement, so one Lua call appends the full DLQ entry
(capped with an approximate MAXLEN) and acknowledges the message, only if the message is
still pending. A crash before the call leaves the message pending (it is recovered and
dead-lettered again); a crash after it has done both; two workers racing on the same
delivery produce exactly one entry, because only the first call finds it pending.

Dead letters are idempotent per message, as effects are: the script remembers each
dead-lettered id (a sorted set beside the stream, for the markers' TTL) and acknowledges
an id it has seen without a second entry. The loop also looks the ids of every batch up
before processing (:func:`queue_dead_check`, one command per batch), so a message read
again (a consumer group deleted and re-created at 0) is never handed to the processor.

Redis does not roll back a script that fails half-way, so the DLQ's type is checked and
the XADD (the write that can meet ``maxmemory``) is made before the XACK: a failing call
leaves the message pending and the next attempt writes the dead letter.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Mapping, Sequence
from datetime import datetime, timezone
from typing import Any, Literal

from sentinel_platform.schemas import DeadLetter, DeadLetterReason
from sentinel_platform.streams.plumbing.keys import StreamKeys, attempt_key, dead_letters_key
from sentinel_platform.streams.plumbing.scripts import WRONG_TYPE_CHECK, LuaScript
from sentinel_platform.streams.plumbing.undecodable import field_bytes, undecodable_error

#: ``error`` of a message that exceeded its deliveries without a recorded exception.
NO_ERROR_RECORDED = "no error recorded: the worker holding it stopped while processing it"

#: Reply of :data:`DEAD_LETTER` for a message dead-lettered before (acknowledged only).
ALREADY_DEAD_LETTERED = -1

DEAD_LETTER = LuaScript(
    "dead_letter",
    WRONG_TYPE_CHECK
    + """
local stream, dlq, record, dead = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local group, id, maxlen, now, cutoff = ARGV[1], ARGV[2], ARGV[3], ARGV[4], ARGV[5]
local bad = wrong_type(dlq, 'stream') or wrong_type(dead, 'zset')
if bad then return bad end
if #redis.call('XPENDING', stream, group, id, id, 1) == 0 then
  redis.call('DEL', record)
  return 0
end
if redis.call('ZSCORE', dead, id) then
  redis.call('XACK', stream, group, id)
  redis.call('DEL', record)
  return -1
end
local fields = {}
for i = 6, #ARGV do fields[#fields + 1] = ARGV[i] end
local entry = redis.call('XADD', dlq, 'MAXLEN', '~', maxlen, '*', unpack(fields))
redis.call('ZADD', dead, now, id)
redis.call('ZREMRANGEBYSCORE', dead, '-inf', '(' .. cutoff)
redis.call('XACK', stream, group, id)
redis.call('DEL', record)
return entry
""",
)


def build_dead_letter(
    keys: StreamKeys,
    message_id: str,
    fields: Mapping[str, str],
    reason: DeadLetterReason,
    error: str,
    deliveries: int,
    consumer: str,
) -> DeadLetter:
    payload, encoding = encode_payload(fields)
    return DeadLetter(
        stream=keys.stream,
        group=keys.group,
        message_id=message_id,
        payload=payload,
        payload_encoding=encoding,
        reason=reason,
        error=error[:1000],
        deliveries=deliveries,
        consumer=consumer,
        dead_lettered_at=datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
    )


def encode_payload(fields: Mapping[str, str]) -> tuple[str, Literal["base64"] | None]:
    """The DLQ ``payload`` of ``fields`` and its ``payload_encoding``.

    Text fields keep Sentinel-L7's format (a JSON object, no encoding field). Fields
    whose bytes are not UTF-8 cannot be JSON text, so every name and value is stored as
    base64 of its exact bytes and the entry says ``payload_encoding=base64``.
    """
    if undecodable_error(fields) is None:
        return json.dumps(dict(fields), ensure_ascii=False, sort_keys=True), None
    encoded = {
        base64.b64encode(name).decode(): base64.b64encode(value).decode()
        for name, value in field_bytes(fields).items()
    }
    return json.dumps(encoded, sort_keys=True), "base64"


def queue_dead_letter(
    pipe: Any, keys: StreamKeys, letter: DeadLetter, dlq_maxlen: int, remember_s: int
) -> None:
    """Queue XADD to the DLQ + XACK (if still pending) on ``pipe`` as one atomic script call.

    The message id is remembered for ``remember_s`` (the markers' TTL): a message already
    dead-lettered is acknowledged without a second entry (a group re-created at 0 reads
    its history again).
    """
    now_ms = int(time.time() * 1000)
    args: list[object] = [
        keys.group,
        letter.message_id,
        dlq_maxlen,
        now_ms,
        now_ms - remember_s * 1000,
    ]
    for name, value in letter.to_fields().items():
        args.extend((name, value))
    record = attempt_key(keys, letter.message_id)
    DEAD_LETTER.queue(pipe, [keys.stream, keys.dlq, record, dead_letters_key(keys)], args)


def queue_dead_check(pipe: Any, keys: StreamKeys, ids: Sequence[str]) -> None:
    """Queue the look-up of which of ``ids`` were dead-lettered already (one command)."""
    pipe.zmscore(dead_letters_key(keys), list(ids))


def already_dead_lettered(ids: Sequence[str], reply: Any) -> set[str]:
    """The ids of :func:`queue_dead_check`'s reply that were dead-lettered already."""
    return {message_id for message_id, score in zip(ids, reply or (), strict=False) if score}


def was_dead_lettered(reply: Any) -> bool:
    """True when the script wrote the DLQ entry (its reply is the entry's id)."""
    return isinstance(reply, (str, bytes)) and reply not in ("0", b"0")
