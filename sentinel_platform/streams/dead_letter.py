"""Dead letters: the original message, why it died, moved to the DLQ atomically with its XACK.

The original logged a dead letter and acknowledged it, so the payload was gone. Here one
Lua call acknowledges the message and, only if that acknowledgement removed it from the
pending list, appends the full DLQ entry (capped with an approximate MAXLEN). A crash
before the call leaves the message pending (it is recovered and dead-lettered again); a
crash after it has done both; two workers racing on the same delivery produce exactly
one entry, because only one XACK can return 1.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import Any

from sentinel_platform.schemas import DeadLetter, DeadLetterReason
from sentinel_platform.streams.keys import StreamKeys, attempts_key
from sentinel_platform.streams.scripts import LuaScript

#: ``error`` of a message that exceeded its deliveries without a recorded exception.
NO_ERROR_RECORDED = "no error recorded: the worker holding it stopped while processing it"

DEAD_LETTER = LuaScript(
    "dead_letter",
    """
local acked = redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
redis.call('HDEL', KEYS[3], ARGV[2], ARGV[2] .. ':err')
if acked == 0 then return 0 end
local fields = {}
for i = 4, #ARGV do fields[#fields + 1] = ARGV[i] end
return redis.call('XADD', KEYS[2], 'MAXLEN', '~', ARGV[3], '*', unpack(fields))
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
    """Queue XACK + (if acked) XADD to the DLQ on ``pipe`` as one atomic script call."""
    args: list[object] = [keys.group, letter.message_id, dlq_maxlen]
    for name, value in letter.to_fields().items():
        args.extend((name, value))
    DEAD_LETTER.queue(pipe, [keys.stream, keys.dlq, attempts_key(keys)], args)


def was_dead_lettered(reply: Any) -> bool:
    """True when the script acknowledged the message and wrote the DLQ entry."""
    return bool(reply) and reply != 0 and reply != "0"
