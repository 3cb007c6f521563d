"""Dead letters: the original message, why it died, moved to the DLQ atomically with its XACK.

The payload must survive its acknowledgement, so one Lua call appends the full DLQ entry
(capped with an approximate MAXLEN) and acknowledges the message, only if the message is
still pending. A crash before the call leaves the message pending (it is recovered and
dead-lettered again); a crash after it has done both; two workers racing on the same
delivery produce exactly one entry, because only the first call finds it pending.

Redis does not roll back a script that fails half-way, so the DLQ's type is checked and
the XADD (the write that can meet ``maxmemory``) is made before the XACK: a failing call
leaves the message pending and the next attempt writes the dead letter.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from sentinel_platform.schemas import DeadLetter, DeadLetterReason
from sentinel_platform.streams.keys import StreamKeys, attempt_key
from sentinel_platform.streams.scripts import WRONG_TYPE_CHECK, LuaScript

#: ``error`` of a message that exceeded its deliveries without a recorded exception.
NO_ERROR_RECORDED = "no error recorded: the worker holding it stopped while processing it"

DEAD_LETTER = LuaScript(
    "dead_letter",
    WRONG_TYPE_CHECK
    + """
local stream, dlq, record = KEYS[1], KEYS[2], KEYS[3]
local group, id, maxlen = ARGV[1], ARGV[2], ARGV[3]
local bad = wrong_type(dlq, 'stream')
if bad then return bad end
if #redis.call('XPENDING', stream, group, id, id, 1) == 0 then
  redis.call('DEL', record)
  return 0
end
local fields = {}
for i = 4, #ARGV do fields[#fields + 1] = ARGV[i] end
local entry = redis.call('XADD', dlq, 'MAXLEN', '~', maxlen, '*', unpack(fields))
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
    return DeadLetter(
        stream=keys.stream,
        group=keys.group,
        message_id=message_id,
        payload=json.dumps(dict(fields), ensure_ascii=False, sort_keys=True),
        reason=reason,
        error=error[:1000],
        deliveries=deliveries,
        consumer=consumer,
        dead_lettered_at=datetime.now(timezone.utc).isoformat(timespec="milliseconds"),
    )


def queue_dead_letter(pipe: Any, keys: StreamKeys, letter: DeadLetter, dlq_maxlen: int) -> None:
    """Queue XADD to the DLQ + XACK (if still pending) on ``pipe`` as one atomic script call."""
    args: list[object] = [keys.group, letter.message_id, dlq_maxlen]
    for name, value in letter.to_fields().items():
        args.extend((name, value))
    record = attempt_key(keys, letter.message_id)
    DEAD_LETTER.queue(pipe, [keys.stream, keys.dlq, record], args)


def was_dead_lettered(reply: Any) -> bool:
    """True when the script acknowledged the message and wrote the DLQ entry."""
    return bool(reply) and reply != 0 and reply != "0"
