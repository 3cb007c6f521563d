"""The life of one batch in the ledger, as pure transitions: what may follow what, and
what whoever finds a batch must do with it.

A batch is recorded *before* it is submitted, so a worker that dies at any point leaves
a record to take over from, and no message is sent twice:

* ``recorded``: the batch's messages are written; its submission is under way, or died
  before the provider's answer was known (*unknown*: the batch may or may not exist at
  the provider);
* ``submitted``: the provider's batch id is recorded; it is polled until it ends;
* ``ended``: the provider ended it (or failed it as a whole); its results are being
  committed, each through the real-time verdict's commit path (idempotent, so a second
  committer decides nothing twice);
* ``refused``: the provider refused the submission (no batch exists there): its messages
  go another way;
* ``settled``: every message is decided; the record is removed.

:func:`advance` is the table of transitions; an event that repeats the state it leads
to is a no-op (two takers may both see a batch end), any other is
:class:`IllegalTransition`. :func:`duty` says what a taker does with a record found.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

State = Literal["recorded", "submitted", "ended", "refused", "settled"]
Event = Literal["submitted", "ended", "refused", "settled"]
#: What a taker does with a batch it finds: wait (someone submits it now), resolve an
#: unknown submission (look for it at the provider, else submit it again), poll it,
#: commit its results, or nothing.
Duty = Literal["wait", "resolve_unknown", "poll", "commit", "reroute", "none"]

STATES: tuple[State, ...] = ("recorded", "submitted", "ended", "refused", "settled")

#: (from, event) -> to.
TRANSITIONS: dict[tuple[State, Event], State] = {
    ("recorded", "submitted"): "submitted",
    ("recorded", "refused"): "refused",
    ("submitted", "ended"): "ended",
    ("ended", "settled"): "settled",
    ("refused", "settled"): "settled",
}


#: What a taker does with a batch in each state but ``recorded`` (which depends on its age).
DUTIES: dict[State, Duty] = {
    "submitted": "poll",
    "ended": "commit",
    "refused": "reroute",
    "settled": "none",
}


class IllegalTransition(ValueError):
    """An event that cannot follow the batch's state (a second submission of a batch
    already at the provider, a batch settled before it ended)."""


@dataclass(frozen=True)
class Step:
    """Where an event leads, and whether anything changed (False for a repeat)."""

    state: State
    changed: bool


def advance(state: State, event: Event) -> Step:
    """The state after ``event``; a repeat of the state it leads to changes nothing,
    except ``submitted``: a second provider batch id for one batch is a double
    submission, never repeated silently."""
    target = TRANSITIONS.get((state, event))
    if target is not None:
        return Step(target, True)
    if event != "submitted" and state == event:
        return Step(state, False)
    raise IllegalTransition(f"a {state} batch cannot be {event}")


def duty(state: State, age_s: float, submit_deadline_s: float) -> Duty:
    """What a taker does with a batch in ``state``, recorded ``age_s`` ago; a
    ``recorded`` batch younger than ``submit_deadline_s`` (the longest a submission
    takes) may still be being submitted by its owner."""
    if state == "recorded":
        return "wait" if age_s < submit_deadline_s else "resolve_unknown"
    return DUTIES[state]
