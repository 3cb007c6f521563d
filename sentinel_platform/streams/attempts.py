"""How many times a redelivered message was really handed to the processor, and its last error.

Redis' delivery count is not that number: a worker reads a batch (COUNT n), so when it is
killed every unprocessed message of the batch has been *delivered* once more without
being *processed*. Counting deliveries would dead-letter healthy messages that merely sat
in the tail of a few killed batches. So the loop records each processor call on a
*redelivered* message (delivery count > 1) in a hash before making it; first deliveries,
the hot path, are not recorded and are assumed to have been processed once. A message is
therefore handed to the processor at most ``SENTINEL_RECLAIM_DELIVERY_LIMIT`` times,
exactly that many times when it keeps failing, and a message that kills its worker every
time is still caught (the call is recorded before it is made).

Fields of the hash ``attempts_key(keys)``: ``<id>`` = recorded calls, ``<id>:err`` = the
last exception. Both are removed when the message is committed or dead-lettered; the
hash has a TTL as a guard against leaks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sentinel_platform.streams.connection import RedisClient


@dataclass(frozen=True)
class AttemptRecord:
    calls: int = 0
    last_error: str | None = None


def read_attempts(client: RedisClient, key: str, ids: Sequence[str]) -> dict[str, AttemptRecord]:
    """Records of ``ids`` in one HMGET."""
    if not ids:
        return {}
    fields = [part for message_id in ids for part in (message_id, f"{message_id}:err")]
    values = client.hmget(key, fields)
    records = {}
    for index, message_id in enumerate(ids):
        calls, error = values[2 * index], values[2 * index + 1]
        records[message_id] = AttemptRecord(int(calls or 0), error)
    return records


def record_call(client: RedisClient, key: str, message_id: str, ttl_s: int) -> None:
    """Note one processor call before it is made (survives the worker dying in it)."""
    pipe = client.pipeline(transaction=False)
    pipe.hincrby(key, message_id, 1)
    pipe.expire(key, ttl_s)
    pipe.execute()


def queue_error(pipe: Any, key: str, message_id: str, error: str, ttl_s: int) -> None:
    """Queue the last error of a failed call (reported in the dead letter if it dies)."""
    pipe.hset(key, f"{message_id}:err", error)
    pipe.expire(key, ttl_s)
