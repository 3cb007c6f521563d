"""The pacing controller as a pure function: single steps from tables, then closed loops.

The closed loops run the controller against a simulated stream (consumers draining at a
given rate, producers stepping on their own clocks): what the bench measures against real
workers, here without timing, so every property is checked exactly and fast.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import pytest

from sentinel_platform.streams.producer.pacing import (
    Decision,
    GiveUp,
    Go,
    Limits,
    Observation,
    PacingState,
    Wait,
    step,
)

LIMITS = Limits(lag_warn=50, lag_pause=200, set_point=125, resume_below=125, max_pause_s=5.0)


def _run(steps: Sequence[tuple[int, int | None, float, bool]]) -> list[Decision]:
    state, decisions = PacingState(), list[Decision]()
    for lag, read, now, flag in steps:
        state, decision = step(LIMITS, state, Observation(lag, read, now, flag))
        decisions.append(decision)
    return decisions


# --- single decisions -------------------------------------------------------------------


def test_start_up_fills_to_the_set_point_in_one_unpaced_batch() -> None:
    (decision,) = _run([(0, 0, 0.0, False)])
    assert decision == Go(budget=125, rate=None)


@pytest.mark.parametrize(
    ("lags", "expected"),
    [
        # at the hard limit: wait; just under it but above the resume level: still wait
        ((250, 150), (True, True)),
        ((250, 150, 100), (True, True, False)),
        ((200,), (True,)),
        ((199,), (False,)),
    ],
)
def test_lag_at_the_hard_limit_waits_until_below_the_resume_level(
    lags: tuple[int, ...], expected: tuple[bool, ...]
) -> None:
    decisions = _run([(lag, i * 10, i * 0.1, False) for i, lag in enumerate(lags)])
    assert tuple(isinstance(d, Wait) and d.hard for d in decisions) == expected


def test_pause_flag_waits_and_resumes_when_cleared_without_hysteresis() -> None:
    decisions = _run([(10, 0, 0.0, True), (10, 0, 0.1, True), (10, 0, 0.2, False)])
    assert [type(d) for d in decisions] == [Wait, Wait, Go]
    assert isinstance(decisions[0], Wait) and "pause flag" in decisions[0].reason


def test_a_stop_longer_than_max_pause_gives_up_naming_the_reason() -> None:
    decisions = _run([(300, 0, 0.0, False), (300, 0, 4.9, False), (300, 0, 5.0, False)])
    assert isinstance(decisions[1], Wait) and decisions[1].waited_s == pytest.approx(4.9)
    assert isinstance(decisions[2], GiveUp) and "hard limit 200" in decisions[2].reason
    assert decisions[2].waited_s == pytest.approx(5.0)


def test_consumers_reading_nothing_while_lag_is_elevated_hold_then_give_up() -> None:
    steps = [(130, 500, t / 10, False) for t in range(0, 80)]
    decisions = _run(steps)
    assert isinstance(decisions[-1], GiveUp) and "read nothing" in decisions[-1].reason
    held = [d for d in decisions if isinstance(d, Wait)]
    assert held and not any(d.hard for d in held)
    assert not any(isinstance(d, Go) and d.rate and d.rate > 50 for d in decisions)


def test_paced_batches_never_cross_the_hard_limit() -> None:
    decisions = _run([(0, 0, 0.0, False), (198, 2_000, 0.1, False)])  # fast readers
    assert isinstance(decisions[1], Wait) or decisions[1].budget == 1


def test_before_a_drain_rate_is_measured_the_lag_is_topped_up_to_the_set_point() -> None:
    # paced once (at the set point), then drained before any rate was measured: filled again
    decisions = _run([(0, 0, 0.0, False), (125, 0, 0.01, False), (60, 65, 0.05, False)])
    assert decisions[2] == Go(budget=65, rate=None)


# lag, drain rate (rows/s), what the decision is: Go with at most ``budget``, or Wait
FAST_AND_SLOW = [
    # a fleet draining 1,400 rows/s under count limits (200 = 0.14 s of work): small
    # batches, at the drain rate at the set point, stopped half way up to the stop
    (125, 1_400, "go", 18),
    (100, 1_400, "go", 18),
    (163, 1_400, "wait", None),
    (190, 1_400, "wait", None),
    # 60 rows/s: the configured gains, batches of 0.1 s of work, as before
    (125, 60, "go", 6),
    (140, 60, "go", 3),
]


@pytest.mark.parametrize(("lag", "drain", "kind", "budget"), FAST_AND_SLOW)
def test_the_correction_is_as_fast_as_the_fleet_drains_the_room_to_the_stop(
    lag: int, drain: int, kind: str, budget: int | None
) -> None:
    # two readings 0.5 s apart measure the rate, the third is decided
    reads = [(125, 0, 0.0, False), (125, drain // 2, 0.5, False), (lag, drain, 1.0, False)]
    decision = _run(reads)[-1]
    if kind == "wait":
        assert isinstance(decision, Wait) and not decision.hard, decision
        return
    assert isinstance(decision, Go) and decision.budget == budget, decision
    assert decision.rate is not None and decision.rate >= 0.9 * drain * (lag <= 125)


# --- closed loops -------------------------------------------------------------------------


@dataclass
class Producer:
    state: PacingState = field(default_factory=PacingState)
    sent: int = 0
    next_at: float = 0.0
    gave_up: bool = False


@dataclass
class Stream:
    """Consumers drain ``rate(t)`` entries/s from the backlog; producers add to it."""

    rate: Callable[[float], float]
    lag: int = 0
    read: int = 0
    carry: float = 0.0
    lags: list[tuple[float, int]] = field(default_factory=list)

    def drain(self, now: float, dt: float) -> None:
        self.carry += self.rate(now) * dt
        done = min(self.lag, int(self.carry))
        self.carry -= int(self.carry)
        self.lag -= done
        self.read += done
        self.lags.append((now, self.lag))


def simulate(
    rate: Callable[[float], float], producers: int = 1, seconds: float = 30.0, batch: int = 500
) -> tuple[Stream, list[Producer], list[Decision]]:
    stream, fleet = Stream(rate), [Producer() for _ in range(producers)]
    decisions: list[Decision] = []
    dt, now = 0.01, 0.0
    while now < seconds:
        for producer in fleet:
            if producer.gave_up or now < producer.next_at:
                continue
            observation = Observation(stream.lag, stream.read, now, producers=producers)
            producer.state, decision = step(LIMITS, producer.state, observation)
            decisions.append(decision)
            if isinstance(decision, Go):
                rows = min(batch, decision.budget)
                stream.lag += rows
                producer.sent += rows
                producer.next_at = now + (rows / decision.rate if decision.rate else 0.002)
            elif isinstance(decision, Wait):
                producer.next_at = now + 0.1
            else:
                producer.gave_up = True
        stream.drain(now, dt)
        now += dt
    return stream, fleet, decisions


def _band(stream: Stream, start: float, end: float = 1e9) -> tuple[int, int]:
    lags = sorted(lag for t, lag in stream.lags if start <= t < end)
    return lags[len(lags) * 5 // 100], lags[len(lags) * 95 // 100]


def _within_band(stream: Stream, start: float, end: float = 1e9) -> None:
    low, high = _band(stream, start, end)
    assert high - low <= 0.25 * LIMITS.lag_pause, (low, high)
    assert LIMITS.lag_warn <= low and high < LIMITS.lag_pause, (low, high)


def test_steady_consumers_hold_the_lag_near_the_set_point_at_their_rate() -> None:
    stream, (producer,), _ = simulate(lambda t: 200.0)
    _within_band(stream, 5.0)
    assert max(lag for _, lag in stream.lags) < LIMITS.lag_pause
    assert producer.sent >= 0.95 * stream.read
    assert stream.read == pytest.approx(200 * 30, rel=0.03)  # the consumers never starved


def test_consumers_halving_their_speed_are_followed_without_a_stop() -> None:
    stream, _, decisions = simulate(lambda t: 400.0 if t < 10 else 200.0)
    _within_band(stream, 14.0)
    assert max(lag for _, lag in stream.lags) < LIMITS.lag_pause
    assert not any(isinstance(d, Wait) and d.hard for d in decisions)


def test_consumers_stopping_hold_the_producer_below_the_hard_limit_then_it_gives_up() -> None:
    stream, (producer,), decisions = simulate(lambda t: 200.0 if t < 10 else 0.0, seconds=20)
    assert producer.gave_up and isinstance(decisions[-1], GiveUp)
    assert max(lag for t, lag in stream.lags) < LIMITS.lag_pause


def test_recovery_after_a_long_consumer_outage_does_not_flood() -> None:
    # Out for 4 s (less than max pause), back at full speed: the integral did not wind up.
    stream, (producer,), _ = simulate(lambda t: 0.0 if 8 <= t < 12 else 300.0, seconds=30)
    assert not producer.gave_up
    assert max(lag for t, lag in stream.lags if t >= 12) < LIMITS.lag_pause
    _within_band(stream, 16.0)


def test_anti_windup_bounds_the_integral_during_a_long_excess() -> None:
    state = PacingState()
    for i in range(2_000):  # lag held above the set point, consumers slowly reading
        state, _ = step(LIMITS, state, Observation(190, i, i * 0.1))
    bound = LIMITS.gains.kp * (LIMITS.lag_pause - LIMITS.lag_warn) / LIMITS.gains.ki
    assert -bound <= state.integral <= 0
    # Back at the set point the rate is the consumers' again, not held down by the past.
    state, decision = step(LIMITS, state, Observation(125, 2_000, 200.0))
    assert isinstance(decision, Go) and decision.rate is not None
    assert 8 <= decision.rate <= 12, decision.rate


def test_two_producers_sharing_a_stream_each_get_a_share() -> None:
    stream, fleet, _ = simulate(lambda t: 300.0, producers=2, seconds=40)
    _within_band(stream, 10.0)
    total = sum(p.sent for p in fleet)
    assert total >= 0.95 * stream.read
    assert all(0.25 <= p.sent / total <= 0.75 for p in fleet), [p.sent for p in fleet]
