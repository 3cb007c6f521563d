"""What each message of a batch comes to, through the real-time verdict's own code.

A model's verdict from a batch is the one the stream's processor makes of an
:class:`~workers.analyzer.answers.replies.Assessment`: the processor is built a second
time around an analyzer that answers with the batch's assessment (:class:`GivenAnswer`),
so the result entry has every field a real-time verdict has (the rules' verdict, the
truth, the model, the prompt's version, the tokens), plus ``lane=batch``. A message the
processor decides without asking the model (a demo entry, an axiom below the audit
threshold) is decided at once and never sent (:meth:`BatchVerdicts.unasked`). It is committed
as a real-time verdict is (results entry, idempotency marker, XACK; the recent feed
keeps to live verdicts).

A message without a verdict (its line ``errored``, ``expired`` or ``canceled``, left out
of the results, its batch failed or refused as a whole) follows
``SENTINEL_ANALYZER_WHEN_DOWN`` (:func:`route`):

* ``rules``: the processor makes its own fallback of it (the rules' verdict of a
  transaction; an axiom assumed the worst), whose ``fallback_cause`` is ``batch_`` and
  the reason (:func:`~sentinel_platform.streams.backlog.provisional.batch_cause`:
  ``batch_errored``, ``batch_expired``, ...). It is final, neither
  provisional nor queued for re-screening: the batch lane carries past data nobody
  waits for, and a re-screen would ask the model again in real time at full price;
  what an errored line billed is recorded as a real-time fallback's is;
* ``wait``: the message goes back to the stream's batch lane, to be sent in a later
  batch; an ``errored`` line, which the provider ran and answered with an error, is
  dead-lettered instead (asking again would repeat it), as ``wait`` does with a message
  the model refused in real time.

A batch that failed for the provider's queue limit (``held``) failed for nothing of its
messages': they go back to the batch lane whatever the setting.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal, cast

from sentinel_platform.registry import WireModel
from sentinel_platform.streams.backlog.provisional import (
    FALLBACK_CAUSE,
    PROVISIONAL,
    batch_cause,
)
from sentinel_platform.streams.consumer.outcomes import Commit, DeadLetterOp, Delivery
from sentinel_platform.streams.consumer.processor import Effect
from workers.analyzer.answers.replies import AnalyzerError, Assessment, Usage
from workers.analyzer.apis.model_api import Analyzer
from workers.processors.base import WireProcessor

#: Result field of every verdict: the lane it was decided in (absent: real time).
LANE = "lane"
BATCH = "batch"
#: Why a message of a batch has no verdict.
Undecided = Literal["errored", "expired", "canceled", "unanswered", "failed", "refused", "held"]
Route = Literal["rules", "requeue", "dead_letter"]


@dataclass(frozen=True)
class Entry:
    """One entry of the batch lane: its id (the batch request's ``custom_id``), its
    wire fields and the message they parse to."""

    id: str
    fields: dict[str, str]
    message: WireModel


@dataclass(frozen=True)
class Requeue:
    """The entry goes back to the batch lane (a fresh entry, the old one acknowledged)."""

    entry: Entry


Decision = Commit | DeadLetterOp | Requeue


def route(why: Undecided, when_down: str) -> Route:
    """Where a message without a verdict goes (see the module)."""
    if why == "held":
        return "requeue"
    if when_down == "wait":
        return "dead_letter" if why == "errored" else "requeue"
    return "rules"


class BatchLineFailed(AnalyzerError):
    """What the processor is told when its message's request got no verdict: it makes
    its own fallback of it (the rules' verdict; an axiom assumed the worst)."""


class GivenAnswer:
    """An analyzer that answers with what it is given (the batch's assessment, or a
    failure to raise) and notes that it was asked."""

    def __init__(self) -> None:
        self.answer: Assessment | Exception = BatchLineFailed("no batch answer was given")
        self.asked = False

    def assess_transaction(self, txn: object) -> Assessment:
        return self._answer()

    def assess_axiom(self, axiom: object) -> Assessment:
        return self._answer()

    def _answer(self) -> Assessment:
        self.asked = True
        if isinstance(self.answer, Exception):
            raise self.answer
        return self.answer


class BatchVerdicts:
    """The decisions of ``live``'s stream's batch messages (see the module)."""

    def __init__(self, live: WireProcessor[Any], when_down: str) -> None:
        self.live = live
        self.when_down = when_down
        self.given = GivenAnswer()
        self.modelled = type(live)(live.settings, cast(Analyzer, self.given))

    def _process(self, entry: Entry, answer: Assessment | Exception) -> tuple[Effect, bool]:
        """The processor's effect for ``entry`` given ``answer``; whether it asked."""
        self.given.answer, self.given.asked = answer, False
        try:
            return self.modelled.process(entry.message), self.given.asked
        finally:
            self.given.answer = BatchLineFailed("no batch answer was given")

    def unasked(self, entry: Entry) -> Commit | None:
        """The verdict of a message the processor decides without the model (a demo
        entry, an axiom below the audit threshold), or None: it goes in a batch."""
        effect, asked = self._process(entry, BatchLineFailed("not sent"))
        return None if asked else commit(entry, effect, {})

    def verdict(self, entry: Entry, assessment: Assessment) -> Commit:
        """The model's verdict of ``entry``, as the real-time path makes it."""
        return commit(entry, self._process(entry, assessment)[0], {})

    def undecided(self, entry: Entry, why: Undecided, usage: Usage | None = None) -> Decision:
        """What a message without a verdict comes to (:func:`route`)."""
        where = route(why, self.when_down)
        if where == "requeue":
            return Requeue(entry)
        if where == "dead_letter":
            error = f"the batch lane's model gave no verdict ({why})"
            return DeadLetterOp(delivery(entry), "unprocessable", error)
        effect, _ = self._process(entry, BatchLineFailed(f"batch request {why}"))
        billed = usage.recorded() if usage is not None else {}
        said = {"driver_used": "fallback", FALLBACK_CAUSE: batch_cause(why), **billed}
        return commit(entry, effect, said)


def delivery(entry: Entry) -> Delivery:
    return Delivery(entry.id, entry.fields, 1)


def commit(entry: Entry, effect: Effect, said: dict[str, str]) -> Commit:
    """``effect`` as a batch verdict: ``said`` over its result, ``lane=batch``, no
    recent-feed entry, never provisional nor a re-screen queue entry."""
    kept = {k: v for k, v in effect.result.items() if k != PROVISIONAL}
    result = {**kept, **said, LANE: BATCH}
    fields = {**effect.log_fields, **said, LANE: BATCH}
    made = Effect(effect.natural_key, result, None, fields, effect.sample, None)
    return Commit(delivery(entry), effect.natural_key, made)
