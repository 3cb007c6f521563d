"""What the consumer holds and decides for a message, and what one pass of it handled.

A :class:`Delivery` is a message as it was handed to the worker (read, or claimed by
recovery). An :data:`Outcome` is decided before a processor call (a dead letter, an
acknowledgement without a call) or by it (a commit, a failure), and is settled in Redis by
:mod:`~sentinel_platform.streams.consumer.settling.outbox`. A :class:`Prepared` message is
one that is due for its call. These are plain values, shared by every room of the
consumer, so none of them imports another for its types.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any, Literal

from sentinel_platform.schemas import DeadLetterReason
from sentinel_platform.streams.consumer.processor import Effect


@dataclass(frozen=True, slots=True)
class Delivery:
    """One message handed to this worker, with its delivery count including this delivery."""

    id: str
    fields: dict[str, str]
    deliveries: int
    #: consumer it was claimed from; None for new reads, ourselves for our own retries
    claimed_from: str | None = None


@dataclass(slots=True)
class Commit:
    delivery: Delivery
    natural_key: str
    effect: Effect


@dataclass(slots=True)
class DeadLetterOp:
    delivery: Delivery
    reason: DeadLetterReason
    error: str


@dataclass(slots=True)
class Failure:
    delivery: Delivery
    error: str


@dataclass(slots=True)
class Acknowledge:
    """Acknowledged without a processor call: its natural key was committed already
    (``duplicate``) or the message was dead-lettered before (``already_dead_lettered``)."""

    delivery: Delivery
    why: Literal["duplicate", "already_dead_lettered"]
    natural_key: str = ""


@dataclass(slots=True)
class Prepared:
    """A message parsed and due for a processor call (no outcome decided yet)."""

    delivery: Delivery
    message: Any
    natural_key: str
    #: seconds spent parsing, counted in the message's processing time
    parse_s: float = 0.0


Outcome = Commit | DeadLetterOp | Failure | Acknowledge


def is_sample(outcome: Outcome) -> bool:
    """Whether a call that ended in ``outcome`` (not busy) is a latency sample of the
    in-flight limit (``AdaptiveLimit.on_sample``): every call that did its work, except
    a commit whose effect says its downstream was not asked or gave no answer
    (``Effect.sample``: a rules fallback). An error that is not a drop stays a sample,
    as the limit's contract says."""
    return not isinstance(outcome, Commit) or outcome.effect.sample


@dataclass(frozen=True, slots=True)
class IterationReport:
    """What one pass of the loop handled; reports add up (``Consumer.totals``)."""

    #: new messages read (``>``)
    read: int = 0
    #: messages claimed by recovery: dead consumers', handed-back ones, our own retries
    recovered: int = 0
    #: effects committed (with marker and XACK)
    committed: int = 0
    #: acknowledged without a second effect: their natural key already had one
    duplicates: int = 0
    #: moved to the DLQ with their payload
    dead_lettered: int = 0
    #: processing failed: left pending on us for a retry
    failed: int = 0
    #: settled elsewhere meanwhile (no longer pending): nothing written
    stale: int = 0
    #: unprocessed on stop, made claimable by any worker
    handed_back: int = 0
    #: consumer groups recreated after they vanished (NOGROUP)
    healed: int = 0
    #: calls the downstream refused as busy: the message waits for a later call
    busy: int = 0

    @property
    def handled(self) -> int:
        """Messages this pass was handed (read or claimed)."""
        return self.read + self.recovered

    @property
    def idle(self) -> bool:
        """Nothing handed to us and nothing settled: the pass found no work."""
        settled = self.committed + self.duplicates + self.dead_lettered + self.failed
        return self.handled == 0 and settled + self.stale == 0

    def __add__(self, other: IterationReport) -> IterationReport:
        return IterationReport(
            **{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)}
        )
