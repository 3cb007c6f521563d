"""Which of a day's provisional verdicts a re-screen launch queues: a pure decision.

A provisional verdict (``provisional="true"``,
:mod:`~sentinel_platform.streams.backlog.provisional`) normally enters its stream's
re-screen queue in the same commit as the verdict, so a launch from the UI is for what
that did not cover: re-screening was turned off, the queue was lost or trimmed. It must
not re-screen a message twice, so a verdict is queued only when nothing else will decide
it again: no model verdict names it in ``rescreen_of`` (it is superseded) and no queue
entry names it (it is waiting, or being re-screened now).

The data's day of a verdict is its ``day`` field; a verdict written before results
carried it counts on the UTC date of its entry id, as the cost table counts it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime

from sentinel_platform.streams.backlog.entry_ages import entry_time_s
from sentinel_platform.streams.backlog.provisional import (
    DAY,
    FALLBACK_CAUSE,
    PROVISIONAL,
    RESCREEN_OF,
)

#: Result field: the id of the message in its source stream.
SOURCE_MESSAGE_ID = "source_message_id"


def entry_day(entry_id: str, fields: Mapping[str, str]) -> str:
    """A result entry's data day: its ``day`` field, else its entry id's UTC date."""
    day = fields.get(DAY)
    if day:
        return day
    return datetime.fromtimestamp(entry_time_s(entry_id), UTC).date().isoformat()


@dataclass(frozen=True)
class Candidate:
    """A provisional verdict to queue: its results entry id, its message's id in the
    source stream, the fallback's cause and the data's day."""

    result_id: str
    source_id: str
    cause: str
    day: str


@dataclass(frozen=True)
class Plan:
    """What a launch does for one day: the verdicts it queues, and the day's provisional
    verdicts it leaves because a model verdict superseded them or they already wait."""

    queue: tuple[Candidate, ...]
    superseded: int
    waiting: int


def plan(results: Iterable[tuple[str, Mapping[str, str]]], day: str) -> Plan:
    """The :class:`Plan` for ``day`` over every entry of the result stream (``results``,
    read once): its provisional verdicts that no model verdict superseded, before the
    queue is looked at (:func:`without_waiting`). A provisional verdict without a
    ``source_message_id`` cannot be read back from its stream and is left out."""
    provisional: list[Candidate] = []
    superseded: set[str] = set()
    for entry_id, fields in results:
        if fields.get(RESCREEN_OF):
            superseded.add(fields[RESCREEN_OF])
        if fields.get(PROVISIONAL) != "true" or entry_day(entry_id, fields) != day:
            continue
        source = fields.get(SOURCE_MESSAGE_ID)
        if source:
            cause = fields.get(FALLBACK_CAUSE, "")
            provisional.append(Candidate(entry_id, source, cause, day))
    queue = tuple(c for c in provisional if c.result_id not in superseded)
    return Plan(queue, superseded=len(provisional) - len(queue), waiting=0)


def without_waiting(decided: Plan, queued: Iterable[str]) -> Plan:
    """``decided`` without the verdicts the re-screen queue already names (``queued``:
    results entry ids), counted as waiting."""
    waiting = set(queued)
    queue = tuple(c for c in decided.queue if c.result_id not in waiting)
    left = len(decided.queue) - len(queue)
    return Plan(queue, decided.superseded, decided.waiting + left)
