"""The analyzer's circuit breaker as a pure state machine, driven by a hand-moved clock.

Each scenario is a table of steps ``(time, action, expected)``:

* ``admit`` expects ``call`` (closed: go ahead), ``probe`` (the one half-open trial) or
  ``reject`` (fail at once);
* ``ok N`` / ``fail N`` / ``busy N`` / ``gone N`` report the outcome of the N-th
  admitted call (0 based; ``busy`` is a 429/503 asking for quiet, ``gone`` a call never
  sent for want of a local connection) and expect the state the breaker moved to
  (``open``, ``half_open``, ``closed``) or ``-`` for no change.

After every step the breaker's state is compared too, so each row pins the whole machine.
"""

from __future__ import annotations

import threading
from datetime import datetime, timezone

import pytest

from workers.analyzer import retry_after_seconds
from workers.analyzer.breaker import CircuitBreaker, Ticket, Transition

FAILURES, COOLDOWN = 3, 30.0
Step = tuple[float, str, str, str]  # time, action, expected result, state afterwards

SCENARIOS: dict[str, list[Step]] = {
    "successes keep it closed and reset the failure count": [
        (0, "admit", "call", "closed"),
        (0, "fail 0", "-", "closed"),
        (0, "admit", "call", "closed"),
        (0, "fail 1", "-", "closed"),
        (0, "admit", "call", "closed"),
        (0, "ok 2", "-", "closed"),
        (1, "admit", "call", "closed"),
        (1, "fail 3", "-", "closed"),
        (1, "admit", "call", "closed"),
        (1, "fail 4", "-", "closed"),
    ],
    "N consecutive failures open it; calls are then rejected until the cool-down ends": [
        (0, "admit", "call", "closed"),
        (0, "fail 0", "-", "closed"),
        (0, "admit", "call", "closed"),
        (0, "fail 1", "-", "closed"),
        (0, "admit", "call", "closed"),
        (0, "fail 2", "open", "open"),
        (0, "admit", "reject", "open"),
        (29.9, "admit", "reject", "open"),
    ],
    "after the cool-down exactly one probe; its success closes the breaker": [
        *[
            (0, action, "call" if action == "admit" else "-", "closed")
            for action in ("admit", "fail 0", "admit", "fail 1", "admit")
        ],
        (0, "fail 2", "open", "open"),
        (30, "admit", "probe", "half_open"),
        (30, "admit", "reject", "half_open"),
        (31, "admit", "reject", "half_open"),
        (31, "ok 3", "closed", "closed"),
        (31, "admit", "call", "closed"),
        (31, "admit", "call", "closed"),
    ],
    "a failed probe re-opens it for another full cool-down": [
        *[
            (0, action, "call" if action == "admit" else "-", "closed")
            for action in ("admit", "fail 0", "admit", "fail 1", "admit")
        ],
        (0, "fail 2", "open", "open"),
        (40, "admit", "probe", "half_open"),
        (41, "fail 3", "open", "open"),
        (70, "admit", "reject", "open"),
        (71, "admit", "probe", "half_open"),
        (71, "ok 4", "closed", "closed"),
    ],
    "a busy answer is neither a failure nor a success of a closed breaker": [
        *[
            (0, action, "call" if action == "admit" else "-", "closed")
            for action in ("admit", "fail 0", "admit", "fail 1", "admit", "busy 2")
        ],
        *[
            (0, action, "call" if action == "admit" else "-", "closed")
            for action in ("admit", "busy 3")
        ],
        (0, "admit", "call", "closed"),
        (0, "fail 4", "open", "open"),
    ],
    "a probe answered busy closes the breaker: the analyzer is up": [
        *[
            (0, action, "call" if action == "admit" else "-", "closed")
            for action in ("admit", "fail 0", "admit", "fail 1", "admit")
        ],
        (0, "fail 2", "open", "open"),
        (30, "admit", "probe", "half_open"),
        (30, "busy 3", "closed", "closed"),
        (30, "admit", "call", "closed"),
    ],
    "a probe never sent goes back: the next caller probes at once": [
        *[
            (0, action, "call" if action == "admit" else "-", "closed")
            for action in ("admit", "fail 0", "admit", "fail 1", "admit")
        ],
        (0, "fail 2", "open", "open"),
        (30, "admit", "probe", "half_open"),
        (30, "admit", "reject", "half_open"),
        (31, "gone 3", "open", "open"),
        (31, "admit", "probe", "half_open"),
        (31, "ok 4", "closed", "closed"),
    ],
    "a call never sent teaches a closed breaker nothing": [
        *[
            (0, action, "call" if action == "admit" else "-", "closed")
            for action in ("admit", "fail 0", "admit", "fail 1", "admit", "gone 2")
        ],
        (0, "admit", "call", "closed"),
        (0, "fail 3", "open", "open"),
    ],
    "a late busy answer or release changes nothing in an open breaker": [
        (0, "admit", "call", "closed"),
        (0, "admit", "call", "closed"),
        (0, "admit", "call", "closed"),
        (0, "admit", "call", "closed"),
        (0, "admit", "call", "closed"),
        (0, "fail 0", "-", "closed"),
        (0, "fail 1", "-", "closed"),
        (0, "fail 2", "open", "open"),
        (1, "busy 3", "-", "open"),
        (1, "gone 4", "-", "open"),
        (29, "admit", "reject", "open"),
    ],
    "results of calls admitted before the breaker opened do not close or count": [
        (0, "admit", "call", "closed"),
        (0, "admit", "call", "closed"),
        (0, "admit", "call", "closed"),
        (0, "admit", "call", "closed"),
        (0, "admit", "call", "closed"),
        (0, "fail 0", "-", "closed"),
        (0, "fail 1", "-", "closed"),
        (0, "fail 2", "open", "open"),
        (1, "ok 3", "-", "open"),
        (1, "fail 4", "-", "open"),
        (1, "admit", "reject", "open"),
        (30, "admit", "probe", "half_open"),
    ],
    "a stale success does not close a half-open breaker; only the probe does": [
        (0, "admit", "call", "closed"),
        (0, "admit", "call", "closed"),
        (0, "admit", "call", "closed"),
        (0, "admit", "call", "closed"),
        (0, "fail 0", "-", "closed"),
        (0, "fail 1", "-", "closed"),
        (0, "fail 2", "open", "open"),
        (30, "admit", "probe", "half_open"),
        (30, "ok 3", "-", "half_open"),
        (30, "admit", "reject", "half_open"),
        (31, "fail 4", "open", "open"),
    ],
    "a failure between successes starts the count again": [
        (0, "admit", "call", "closed"),
        (0, "fail 0", "-", "closed"),
        (0, "admit", "call", "closed"),
        (0, "fail 1", "-", "closed"),
        (0, "admit", "call", "closed"),
        (0, "ok 2", "-", "closed"),
        (0, "admit", "call", "closed"),
        (0, "fail 3", "-", "closed"),
        (0, "admit", "call", "closed"),
        (0, "fail 4", "-", "closed"),
        (0, "admit", "call", "closed"),
        (0, "fail 5", "open", "open"),
    ],
}


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


@pytest.mark.parametrize("steps", SCENARIOS.values(), ids=SCENARIOS.keys())
def test_breaker_follows_the_table(steps: list[Step]) -> None:
    clock = Clock()
    breaker = CircuitBreaker(FAILURES, COOLDOWN, clock=clock)
    tickets: list[Ticket] = []
    for number, (at, action, expected, state) in enumerate(steps):
        clock.now = at
        where = f"step {number} ({at}, {action!r})"
        if action == "admit":
            admission = breaker.admit()
            if admission.ticket is None:
                result = "reject"
                assert admission.retry_in_s >= 0, where
            else:
                result = "probe" if admission.ticket.probe else "call"
                tickets.append(admission.ticket)
            if result == "probe":
                assert admission.transition is not None, where
                assert admission.transition.state == "half_open", where
            else:
                assert admission.transition is None, where
        else:
            verb, index = action.split()
            ticket = tickets[int(index)]
            transition: Transition | None
            if verb == "ok":
                transition = breaker.succeeded(ticket)
            elif verb == "fail":
                transition = breaker.failed(ticket, "refused")
            elif verb == "busy":
                transition = breaker.busy(ticket)
            else:
                transition = breaker.released(ticket)
            result = "-" if transition is None else transition.state
        assert result == expected, where
        assert breaker.state == state, where


def test_transitions_say_why_and_for_how_long() -> None:
    clock = Clock()
    breaker = CircuitBreaker(2, 30.0, clock=clock)
    first, second = breaker.admit().ticket, breaker.admit().ticket
    assert first is not None and second is not None
    assert breaker.failed(first, "connection refused") is None
    opened = breaker.failed(second, "timed out")
    assert opened == Transition("open", "closed", "2 consecutive failures, last: timed out", 30.0)
    clock.now = 30.0
    admission = breaker.admit()
    assert admission.transition == Transition("half_open", "open", "cool-down over", 0.0)
    assert admission.ticket is not None
    assert breaker.succeeded(admission.ticket) == Transition(
        "closed", "half_open", "probe succeeded", 0.0
    )
    opened_again = Transition("open", "closed", "2 consecutive failures, last: refused", 30.0)
    clock.now = 31.0
    for _ in range(2):
        ticket = breaker.admit().ticket
        assert ticket is not None and breaker.failed(ticket, "refused") in (None, opened_again)
    assert breaker.state == "open"
    clock.now = 61.0
    probe = breaker.admit().ticket
    assert probe is not None and probe.probe
    assert breaker.busy(probe) == Transition(
        "closed", "half_open", "probe answered: busy, but up", 0.0
    )


def test_only_one_of_many_threads_gets_the_half_open_probe() -> None:
    clock = Clock()
    breaker = CircuitBreaker(1, 5.0, clock=clock)
    ticket = breaker.admit().ticket
    assert ticket is not None
    breaker.failed(ticket, "refused")
    clock.now = 5.0
    start = threading.Barrier(32)
    admitted: list[Ticket] = []
    lock = threading.Lock()

    def contend() -> None:
        start.wait()
        for _ in range(50):
            got = breaker.admit().ticket
            if got is not None:
                with lock:
                    admitted.append(got)

    threads = [threading.Thread(target=contend) for _ in range(32)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(admitted) == 1 and admitted[0].probe
    assert breaker.state == "half_open"


@pytest.mark.parametrize(("failures", "cooldown_s"), [(0, 1.0), (-1, 1.0), (1, 0.0), (1, -2.0)])
def test_nonsense_limits_are_refused(failures: int, cooldown_s: float) -> None:
    with pytest.raises(ValueError):
        CircuitBreaker(failures, cooldown_s)


NOW = datetime(2026, 11, 24, 12, 0, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("5", 5.0),
        (" 120 ", 120.0),
        ("0", 0.0),
        ("Tue, 24 Nov 2026 12:00:30 GMT", 30.0),
        ("Tue, 24 Nov 2026 11:59:00 GMT", 0.0),  # already past: come back now
        ("-3", None),
        ("soon", None),
        ("", None),
        ("1.5", None),  # RFC 9110: delay-seconds is a non-negative integer
        (None, None),
    ],
)
def test_retry_after_is_seconds_or_an_http_date(header: str | None, seconds: float | None) -> None:
    assert retry_after_seconds(header, NOW) == seconds


@pytest.mark.parametrize(
    ("steps", "now", "expected"),
    [
        ([], 0.0, "closed"),
        (["fail", "fail"], 0.0, "open"),  # refusing: the cool-down runs
        (["fail", "fail"], 29.9, "open"),
        (["fail", "fail"], 30.0, "closed"),  # cool-down over, no call: nothing refused
        (["fail", "fail"], 999.0, "closed"),  # an idle stream stays so
        (["fail", "fail", "probe"], 30.0, "half_open"),  # the probe is out
        (["fail", "fail", "probe", "fail"], 30.0, "open"),  # it failed: a new cool-down
        (["fail", "fail", "probe", "fail"], 60.0, "closed"),
    ],
)
def test_the_state_now_is_open_only_while_calls_are_refused(
    steps: list[str], now: float, expected: str
) -> None:
    """``state_now`` is what the gauge shows at a scrape: the state as of the last call
    would say ``open`` on an idle stream for ever after any short outage."""
    clock = Clock()
    breaker = CircuitBreaker(2, 30.0, clock=clock)
    ticket: Ticket | None = None
    for step in steps:
        if step == "probe":
            clock.now = 30.0
            ticket = breaker.admit().ticket
            assert ticket is not None and ticket.probe
        elif ticket is not None and ticket.probe:
            breaker.failed(ticket, "refused")
        else:
            admitted = breaker.admit().ticket
            assert admitted is not None
            breaker.failed(admitted, "refused")
    clock.now = now
    assert breaker.state_now() == expected
