"""The batch ledger in Redis: every batch of a stream's batch lane, from before it is
submitted until its last message is decided, so a verdict is given exactly once
whoever dies.

A batch's messages (``custom_id`` -> stream entry id) and its state are written
(:meth:`BatchLedger.record`) *before* the provider is asked; the provider's batch id
once it answers (:meth:`BatchLedger.submitted`). Whoever takes the stream over reads
:meth:`BatchLedger.outstanding` and resumes polling those batches instead of submitting
them again, and finds in :meth:`BatchLedger.unknown` the batches whose submission died
before its answer was known. The states and what may follow what are pure
(:mod:`~workers.analyzer.batch.ledger_state`); here each change is a compare-and-set
script on the state read, so two takers cannot both move a batch. All keys live below
:func:`~sentinel_platform.streams.plumbing.keys.batches_key`, in the stream's hash slot
on a cluster.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import cast

from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, batches_key
from workers.analyzer.answers.refusals import ApiKind
from workers.analyzer.batch.ledger_state import Event, State, advance, duty
from workers.analyzer.batch.protocol import BatchRef

#: Message pairs written per ``HSET`` inside the record script (Lua's unpack is bounded).
PAIRS_PER_HSET = 500

_RECORD_LUA = """
if redis.call('EXISTS', KEYS[2]) == 1 then return 0 end
local step = 2 * tonumber(ARGV[5])
for i = 6, #ARGV, step do
  redis.call('HSET', KEYS[3], unpack(ARGV, i, math.min(i + step - 1, #ARGV)))
end
redis.call('HSET', KEYS[2], 'state', 'recorded', 'kind', ARGV[3], 'count', ARGV[4],
  'created_ms', ARGV[2], 'updated_ms', ARGV[2])
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[1])
return 1
"""

_MOVE_LUA = """
local state = redis.call('HGET', KEYS[2], 'state')
if not state then return -1 end
if state ~= ARGV[1] then return 0 end
if ARGV[2] == 'settled' then
  redis.call('DEL', KEYS[2], KEYS[3])
  redis.call('ZREM', KEYS[1], ARGV[4])
  return 1
end
redis.call('HSET', KEYS[2], 'state', ARGV[2], 'updated_ms', ARGV[3])
for i = 5, #ARGV, 2 do redis.call('HSET', KEYS[2], ARGV[i], ARGV[i + 1]) end
return 1
"""


_POLLED_LUA = """
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
redis.call('HSET', KEYS[1], 'provider_status', ARGV[1])
return 1
"""


class BatchMissing(LookupError):
    """No such batch in the ledger (settled, or never recorded)."""


@dataclass(frozen=True)
class BatchRecord:
    """One batch as the ledger holds it; ``batch_id`` the provider's, once known."""

    local_id: str
    kind: str
    state: State
    count: int
    created_ms: int
    updated_ms: int
    batch_id: str = ""
    reason: str = ""
    provider_status: str = ""

    @property
    def ref(self) -> BatchRef | None:
        """The provider's batch, once submitted."""
        return BatchRef(cast(ApiKind, self.kind), self.batch_id) if self.batch_id else None


def new_local_id() -> str:
    """A fresh ledger id for a batch (also the label the provider may keep)."""
    return uuid.uuid4().hex


def now_ms() -> int:
    return int(time.time() * 1000)


class BatchLedger:
    """The batch ledger of the stream ``keys`` names, through ``client``."""

    def __init__(self, client: RedisClient, keys: StreamKeys) -> None:
        self.client = client
        self.index = batches_key(keys)
        self._record = client.register_script(_RECORD_LUA)
        self._move = client.register_script(_MOVE_LUA)
        self._polled = client.register_script(_POLLED_LUA)

    def keys_of(self, local_id: str) -> list[str]:
        """The index, the batch's record and its messages (one slot on a cluster)."""
        return [self.index, f"{self.index}:{local_id}", f"{self.index}:{local_id}:messages"]

    def record(
        self, local_id: str, kind: str, messages: Mapping[str, str], at_ms: int | None = None
    ) -> BatchRecord:
        """Write a batch about to be submitted: ``messages`` maps each ``custom_id`` to
        its stream entry id. All or nothing; a ``local_id`` already recorded raises."""
        if not messages:
            raise ValueError("a batch without messages is not recorded")
        at = now_ms() if at_ms is None else at_ms
        pairs = [part for pair in messages.items() for part in pair]
        args: list[str | int] = [local_id, at, kind, len(messages), PAIRS_PER_HSET, *pairs]
        if not self._record(keys=self.keys_of(local_id), args=args):
            raise ValueError(f"batch {local_id} is already recorded")
        return BatchRecord(local_id, kind, "recorded", len(messages), at, at)

    def submitted(self, local_id: str, batch_id: str) -> BatchRecord:
        """The provider took the batch as ``batch_id``; the same id again changes nothing."""
        found = self.get(local_id)
        if found is not None and found.state != "recorded" and found.batch_id == batch_id:
            return found
        return self._change(local_id, "submitted", {"batch_id": batch_id})

    def refused(self, local_id: str, reason: str) -> BatchRecord:
        """The provider refused the submission: no batch exists there."""
        return self._change(local_id, "refused", {"reason": reason})

    def ended(self, local_id: str, reason: str = "") -> BatchRecord:
        """The provider ended the batch (``reason``: why, for one that failed whole)."""
        return self._change(local_id, "ended", {"reason": reason} if reason else {})

    def settled(self, local_id: str) -> None:
        """Every message of the batch is decided: the batch leaves the ledger."""
        self._change(local_id, "settled", {})

    def polled(self, local_id: str, provider_status: str) -> bool:
        """Keep the provider's own status text of its last poll (``provider_status``:
        ``in_progress``, ``finalizing``, ...) for the "at the provider" readers; the
        state is not changed. False when the batch is no longer in the ledger (settled
        meanwhile: it is not brought back)."""
        return bool(self._polled(keys=[self.keys_of(local_id)[1]], args=[provider_status]))

    def get(self, local_id: str) -> BatchRecord | None:
        fields = cast(dict[str, str], self.client.hgetall(self.keys_of(local_id)[1]))
        return from_fields(local_id, fields) if fields else None

    def messages(self, local_id: str) -> dict[str, str]:
        """The batch's ``custom_id`` -> stream entry id."""
        return cast(dict[str, str], self.client.hgetall(self.keys_of(local_id)[2]))

    def batches(self) -> list[BatchRecord]:
        """Every batch in the ledger, oldest first."""
        ids = cast(list[str], self.client.zrange(self.index, 0, -1))
        pipe = self.client.pipeline(transaction=False)
        for local_id in ids:
            pipe.hgetall(self.keys_of(local_id)[1])
        found = zip(ids, pipe.execute(), strict=True)
        return [from_fields(local_id, fields) for local_id, fields in found if fields]

    def outstanding(self) -> list[BatchRecord]:
        """Batches at the provider or ended and not yet committed: a taker resumes them
        (polls, commits) and never submits them again."""
        return [b for b in self.batches() if b.state in ("submitted", "ended")]

    def unknown(self, submit_deadline_s: float, at_ms: int | None = None) -> list[BatchRecord]:
        """Batches recorded longer than ``submit_deadline_s`` ago and never answered:
        their submission died before the provider's answer was known."""
        at = now_ms() if at_ms is None else at_ms
        return [
            b
            for b in self.batches()
            if duty(b.state, (at - b.created_ms) / 1000, submit_deadline_s) == "resolve_unknown"
        ]

    def _change(self, local_id: str, event: Event, fields: dict[str, str]) -> BatchRecord:
        """Move the batch by ``event`` if its state allows (:func:`advance`), as one
        compare-and-set on the state read; a state moved meanwhile is read again."""
        for _ in range(3):
            found = self.get(local_id)
            if found is None:
                raise BatchMissing(f"no batch {local_id} in the ledger {self.index}")
            step = advance(found.state, event)
            if not step.changed:
                return found
            at = now_ms()
            flat = [part for pair in fields.items() for part in pair]
            args: list[str | int] = [found.state, step.state, at, local_id, *flat]
            moved = self._move(keys=self.keys_of(local_id), args=args)
            if moved == 1:
                return BatchRecord(
                    **{**found.__dict__, **fields, "state": step.state, "updated_ms": at}
                )
        raise RuntimeError(f"batch {local_id} kept changing while it was {event}")


def from_fields(local_id: str, fields: Mapping[str, str]) -> BatchRecord:
    return BatchRecord(
        local_id=local_id,
        kind=fields.get("kind", ""),
        state=cast(State, fields.get("state", "recorded")),
        count=int(fields.get("count", 0)),
        created_ms=int(fields.get("created_ms", 0)),
        updated_ms=int(fields.get("updated_ms", 0)),
        batch_id=fields.get("batch_id", ""),
        reason=fields.get("reason", ""),
        provider_status=fields.get("provider_status", ""),
    )
