"""The analyzer's circuit breaker as a pure state machine, driven by a hand-moved clock.

Each scenario is a table of steps ``(time, action, expected)``:

* ``admit`` expects ``call`` (closed: go ahead), ``probe`` (the one half-open trial) or
  ``reject`` (fail at once);
* ``ok N`` / ``fail N`` / ``wait N S`` report the outcome of the N-th admitted call (0
  based; ``wait`` is a 429/503 asking for S seconds) and expect the state the breaker
  moved to (``open``, ``half_open``, ``closed``) or ``-`` for no change.

After every step the breaker's state is compared too, so each row pins the whole machine.
"""

from __future__ import annotations

import threading
from datetime import datetime, timezone

import pytest

from workers.analyzer import retry_after_seconds
from workers.circuit_breaker import CircuitBreaker, Ticket, Transition

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
    "Retry-After opens a closed breaker at once, for exactly that long": [
        (0, "admit", "call", "closed"),
        (0, "wait 0 5", "open", "open"),
        (4.9, "admit", "reject", "open"),
        (5, "admit", "probe", "half_open"),
        (5, "ok 1", "closed", "closed"),
    ],
    "Retry-After longer than the cool-down keeps it open that long, probe included": [
        (0, "admit", "call", "closed"),
        (0, "wait 0 100", "open", "open"),
        (30, "admit", "reject", "open"),
        (99.9, "admit", "reject", "open"),
        (100, "admit", "probe", "half_open"),
        (100, "wait 1 60", "open", "open"),
        (159, "admit", "reject", "open"),
        (160, "admit", "probe", "half_open"),
    ],
    "a late Retry-After from a call admitted while closed never shortens an open period": [
        (0, "admit", "call", "closed"),
        (0, "admit", "call", "closed"),
        (0, "admit", "call", "closed"),
        (0, "admit", "call", "closed"),
        (0, "fail 0", "-", "closed"),
        (0, "fail 1", "-", "closed"),
        (0, "fail 2", "open", "open"),
        (1, "wait 3 2", "-", "open"),
        (3, "admit", "reject", "open"),
        (30, "admit", "probe", "half_open"),
    ],
    "a late Retry-After longer than the open period extends it": [
        (0, "admit", "call", "closed"),
        (0, "admit", "call", "closed"),
        (0, "admit", "call", "closed"),
        (0, "admit", "call", "closed"),
        (0, "fail 0", "-", "closed"),
        (0, "fail 1", "-", "closed"),
        (0, "fail 2", "open", "open"),
        (1, "wait 3 100", "-", "open"),
        (30, "admit", "reject", "open"),
        (101, "admit", "probe", "half_open"),
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
            verb, index, *rest = action.split()
            ticket = tickets[int(index)]
            transition: Transition | None
            if verb == "ok":
                transition = breaker.succeeded(ticket)
            elif verb == "fail":
                transition = breaker.failed(ticket, "refused")
            else:
                transition = breaker.back_off(ticket, float(rest[0]), "HTTP 503")
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
    ticket = breaker.admit().ticket
    assert ticket is not None
    backed_off = breaker.back_off(ticket, 12.5, "HTTP 429 Retry-After 12.5")
    assert backed_off == Transition("open", "closed", "HTTP 429 Retry-After 12.5", 12.5)
    clock.now = 35.0
    rejected = breaker.admit()
    assert rejected.ticket is None and rejected.retry_in_s == pytest.approx(7.5)


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
