"""A worker's run of busy answers, on a clock the test moves: the backoff where no wait
was given (the SDKs' 0.5 s doubled to 8 s, less jitter), one wave of late answers counted
once, and the bound past which nothing but busy is down."""

from __future__ import annotations

import pytest

from workers.analyzer.answers.busy_spell import BACKOFF_CAP_S, BUSY_BOUND_S, BusySpell, backoff_s
from workers.analyzer.answers.replies import AnalyzerBusy, AnalyzerDown
from workers.analyzer.answers.waits import BusyOrDead


@pytest.mark.parametrize(
    ("consecutive", "rand", "seconds"),
    [
        (1, 0.0, 0.5),
        (1, 1.0, 0.375),  # at most a quarter off
        (2, 0.0, 1.0),
        (3, 0.5, 2.0 * 0.875),
        (4, 0.0, 4.0),
        (5, 0.0, 8.0),
        (6, 0.0, BACKOFF_CAP_S),
        (10_000, 0.999, BACKOFF_CAP_S * (1 - 0.25 * 0.999)),
        (0, 0.0, 0.5),  # never below the first step
    ],
)
def test_the_backoff_doubles_to_its_cap_less_jitter(
    consecutive: int, rand: float, seconds: float
) -> None:
    assert backoff_s(consecutive, rand) == pytest.approx(seconds)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def unbounded(wait: float | None = None) -> AnalyzerBusy:
    return AnalyzerBusy(wait, "analyzer answered HTTP 429")


def bounded() -> BusyOrDead:
    return BusyOrDead(None, "analyzer answered HTTP 503")


# Steps: (seconds since the start, what: "503", "429", "429 wait", "ok", "late 503"),
# and what each busy answer comes to: a backoff (its seconds) or "down".
@pytest.mark.parametrize(
    ("steps", "expected"),
    [
        # Nothing but 503s: the backoff doubles; past the bound, down.
        (
            [(0, "503"), (0.5, "503"), (1.5, "503"), (3.5, "503"), (7.5, "503"), (15.5, "503")],
            [0.5, 1.0, 2.0, 4.0, 8.0, "down"],
        ),
        # A late answer of the same wave does not double the backoff again.
        ([(0, "503"), (0.1, "late 503"), (0.6, "503")], [0.5, 0.5, 1.0]),
        # A success ends the run: the next 503 starts again, bound and backoff.
        ([(0, "503"), (9, "503"), (9.5, "ok"), (10.5, "503"), (20, "503")], [0.5, 1.0, 0.5, 1.0]),
        # 429s with no wait back off too but never count: busy for ever is no outage.
        ([(0, "429"), (1, "429"), (30, "429"), (60, "429")], [0.5, 1.0, 2.0, 4.0]),
        # An explicit wait is kept; it neither counts nor ends the run of 503s.
        ([(0, "503"), (1, "429 wait"), (11, "503")], [0.5, 20.0, "down"]),
        # Exactly at the bound is not past it.
        ([(0, "503"), (BUSY_BOUND_S, "503")], [0.5, 1.0]),
    ],
)
def test_the_run_backs_off_and_is_down_past_the_bound(
    steps: list[tuple[float, str]], expected: list[float | str]
) -> None:
    clock = Clock()
    spell = BusySpell(clock=clock, rand=lambda: 0.0)
    got: list[float | str] = []
    for at, what in steps:
        clock.now = at
        if what == "ok":
            spell.ended()
            continue
        sent_at = -1.0 if what.startswith("late") else at - 0.01  # late: sent before the wave
        answer = {"503": bounded(), "late 503": bounded(), "429": unbounded()}.get(
            what, unbounded(20.0)
        )
        read = spell.busy(answer, sent_at)
        if isinstance(read, AnalyzerDown):
            got.append("down")
            assert "nothing but busy answers" in str(read) and "HTTP 503" in str(read)
        else:
            assert type(read) is type(answer)  # still counted towards the bound, or not
            got.append(read.retry_after_s or 0.0)
    assert got == [pytest.approx(e) if isinstance(e, float) else e for e in expected]


def test_a_bound_must_be_positive() -> None:
    with pytest.raises(ValueError, match="busy bound"):
        BusySpell(bound_s=0)
