"""The life of a batch in the ledger: the table of transitions and what a taker does
with a batch it finds."""

from __future__ import annotations

import itertools

import pytest

from workers.analyzer.batch.ledger_state import (
    STATES,
    TRANSITIONS,
    Duty,
    Event,
    IllegalTransition,
    State,
    Step,
    advance,
    duty,
)

EVENTS: tuple[Event, ...] = ("submitted", "ended", "refused", "settled")


@pytest.mark.parametrize(
    ("state", "event", "step"),
    [
        ("recorded", "submitted", Step("submitted", True)),
        ("recorded", "refused", Step("refused", True)),
        ("submitted", "ended", Step("ended", True)),
        ("ended", "settled", Step("settled", True)),
        ("refused", "settled", Step("settled", True)),
        # two takers see the same end: the second changes nothing
        ("ended", "ended", Step("ended", False)),
        ("settled", "settled", Step("settled", False)),
        ("refused", "refused", Step("refused", False)),
    ],
)
def test_allowed_transitions(state: State, event: Event, step: Step) -> None:
    assert advance(state, event) == step


@pytest.mark.parametrize(
    ("state", "event"),
    [
        ("submitted", "submitted"),  # a second provider batch: a double submission
        ("recorded", "ended"),  # a batch never submitted cannot end
        ("recorded", "settled"),  # nor be settled: its messages are undecided
        ("submitted", "settled"),
        ("submitted", "refused"),  # the provider took it
        ("ended", "submitted"),
        ("settled", "submitted"),
        ("refused", "submitted"),  # refused: its messages went another way
    ],
)
def test_forbidden_transitions(state: State, event: Event) -> None:
    with pytest.raises(IllegalTransition, match=f"a {state} batch cannot be {event}"):
        advance(state, event)


def test_every_pair_is_either_a_transition_a_repeat_or_refused() -> None:
    for state, event in itertools.product(STATES, EVENTS):
        try:
            step = advance(state, event)
        except IllegalTransition:
            assert (state, event) not in TRANSITIONS
            continue
        assert step.changed == ((state, event) in TRANSITIONS)


@pytest.mark.parametrize(
    ("state", "age_s", "expected"),
    [
        ("recorded", 0.0, "wait"),  # its owner may be submitting it now
        ("recorded", 59.9, "wait"),
        ("recorded", 60.0, "resolve_unknown"),  # died between record and answer
        ("recorded", 86_400.0, "resolve_unknown"),
        ("submitted", 0.0, "poll"),  # never submitted again
        ("submitted", 86_400.0, "poll"),
        ("ended", 5.0, "commit"),
        ("refused", 5.0, "reroute"),
        ("settled", 5.0, "none"),
    ],
)
def test_what_a_taker_does_with_a_batch(state: State, age_s: float, expected: Duty) -> None:
    assert duty(state, age_s, submit_deadline_s=60.0) == expected
