"""The producer's pacing decision: a PI controller on consumer lag, fed the measured drain rate.

A producer is paced, not merely stopped, so the consumers never starve and never drown:

* **Feed-forward on the drain rate.** The consumers' rate is measured from the group's
  ``entries-read`` counter (``XINFO GROUPS``): the deltas between two observations,
  smoothed over :attr:`Gains.rate_tau_s`. Sending at that rate keeps the lag where it is.
* **PI correction towards a set point.** The lag is steered to ``set_point`` (between
  ``lag_warn`` and ``lag_pause``): the proportional term closes a gap within about
  ``1 / kp`` seconds; the integral term removes what the rate estimate gets wrong. The
  integral is frozen while the output is saturated or the producer is stopped, and
  clamped (anti-windup), so a long stop does not make the producer flood afterwards.
* **A fair share.** Several producers may feed one stream (one Spark partition each). All
  of them see the same lag and drain rate, so each takes ``1 / producers`` of the total
  rate; the guard counts the producers that observed the stream lately. Shares estimated
  from each producer's own output would keep whatever split the start-up left (the first
  producer to fill the set point would keep nearly all of it).
* **Free below ``lag_warn``.** Under the soft limit nothing is paced: a batch may fill the
  lag up to the set point at once (each producer its share of the room). Pacing starts
  when the lag reaches the set point and ends when it falls below ``lag_warn``
  (hysteresis between the two); until a drain rate is measured, a lag below the set point
  is topped up again, so a fast fleet does not drain it while the rate is unknown.
* **Gains that follow the drain rate.** Count limits are fewer seconds of work the faster
  the fleet drains; the gains rise so that the proportional term alone stops the producer
  half way from the set point to the stop, and a paced batch climbs at most
  :data:`STEP_SHARE` of that room (:func:`_gains`).
* **Hard limit as the safety stop.** At or above ``lag_pause``, or while the operators'
  pause flag is set, the producer waits; after a lag-driven stop it resumes only below
  ``resume_below``. Consumers that drain nothing for ``stall_s`` while the lag is at or
  above ``lag_warn`` hold the producer too. A stop or hold longer than ``max_pause_s``
  gives up, naming the reason.

:func:`step` is pure (no clock, no I/O): the guard in
:mod:`~sentinel_platform.streams.producer.backpressure` reads an :class:`Observation`, steps, and
acts on the decision, so every case can be tested from a table.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

#: A paced batch holds about this much time's worth of rows, so the loop re-reads often.
BATCH_HORIZON_S = 0.1
#: A paced batch climbs at most this share of the room between the set point and the stop.
#: The proportional term alone stops the producer half way up (:func:`_gains`); the upper
#: half is the margin for what the controller cannot see yet: a batch sent just before the
#: lag crossed, and a reading taken just before the consumers' acknowledgements. A quarter
#: each, so neither alone reaches the stop, whatever the drain rate.
STEP_SHARE = 0.25


@dataclass(frozen=True)
class Gains:
    """Controller constants; the defaults suit lag limits of tens to thousands of entries."""

    kp: float = 2.0
    """Proportional gain, 1/s: a lag gap is closed within about ``1 / kp`` seconds."""
    ki: float = 1.0
    """Integral gain, 1/s^2 (critically damped with ``kp = 2``)."""
    rate_tau_s: float = 0.3
    """Smoothing time of the measured drain rate."""
    rate_window_s: float = 0.1
    """Shortest span a drain rate is measured over (the first one is taken as it is)."""
    stall_s: float = 2.0
    """Consumers that read nothing for this long while the lag is elevated hold the producer."""


@dataclass(frozen=True)
class Limits:
    """The thresholds the controller works between (validated by the guard's config)."""

    lag_warn: int
    lag_pause: int
    set_point: int
    resume_below: int
    max_pause_s: float
    gains: Gains = Gains()


@dataclass(frozen=True)
class Observation:
    """One reading: lag (backlog + pending), the group's read counter, live producers."""

    lag: int
    entries_read: int | None
    now: float
    paused_flag: bool = False
    producers: int = 1


@dataclass(frozen=True)
class PacingState:
    """Everything the controller remembers between two observations."""

    last: Observation | None = None
    rate_from: Observation | None = None
    drain: float | None = None
    integral: float = 0.0
    pacing: bool = False
    hysteresis: bool = False
    stopped_since: float | None = None
    progress_at: float | None = None


@dataclass(frozen=True)
class Go:
    """Send up to ``budget`` rows now, then no faster than ``rate`` rows/s (None: unpaced)."""

    budget: int
    rate: float | None


@dataclass(frozen=True)
class Wait:
    """Send nothing; observe again after a poll. ``hard``: at the limit or flagged."""

    reason: str
    waited_s: float
    hard: bool


@dataclass(frozen=True)
class GiveUp:
    """Stopped or held longer than ``max_pause_s``."""

    reason: str
    waited_s: float


Decision = Go | Wait | GiveUp


def step(limits: Limits, state: PacingState, obs: Observation) -> tuple[PacingState, Decision]:
    """Fold ``obs`` into the estimates, then decide what the producer does next."""
    dt = max(0.0, obs.now - state.last.now) if state.last is not None else 0.0
    state = _estimate(limits.gains, state, obs)
    hard = _hard_reason(limits, state, obs)
    if hard is not None:
        lag_driven = state.hysteresis or obs.lag >= limits.lag_pause
        state = replace(state, hysteresis=lag_driven and obs.lag >= limits.resume_below)
        return _stopped(limits, state, obs, hard)
    state = replace(state, hysteresis=False)
    if obs.lag < limits.lag_warn:
        return replace(state, pacing=False, integral=0.0, stopped_since=None), _free(limits, obs)
    if (not state.pacing or state.drain is None) and obs.lag < limits.set_point:
        return replace(state, stopped_since=None), _free(limits, obs)
    state = replace(state, pacing=True)
    stalled_since = state.progress_at if state.progress_at is not None else obs.now
    if obs.now - stalled_since >= limits.gains.stall_s:
        reason = f"consumers read nothing for {obs.now - stalled_since:.1f}s"
        return _stopped(limits, replace(state, stopped_since=stalled_since), obs, reason, False)
    return _paced(limits, state, obs, dt)


def _estimate(gains: Gains, state: PacingState, obs: Observation) -> PacingState:
    """Update the smoothed drain rate from the read counter's delta, and the last progress."""
    last = state.last
    first_progress = state.progress_at if state.progress_at is not None else obs.now
    if last is None or obs.now <= last.now:
        return replace(
            state, last=obs, rate_from=state.rate_from or obs, progress_at=first_progress
        )
    progressed = _read(last, obs) > 0 or obs.lag < last.lag
    state = replace(state, last=obs, progress_at=obs.now if progressed else first_progress)
    origin = state.rate_from or obs
    if origin.entries_read is None:  # nothing to measure from yet: start here
        return replace(state, rate_from=obs)
    span = obs.now - origin.now
    if span < gains.rate_window_s:
        return state
    measured = _read(origin, obs) / span
    if state.drain is None:
        return replace(state, rate_from=obs, drain=measured)
    alpha = 1.0 - math.exp(-span / gains.rate_tau_s)
    return replace(state, rate_from=obs, drain=state.drain + alpha * (measured - state.drain))


def _read(before: Observation, after: Observation) -> int:
    """Entries the consumers were handed between two readings (0 when unknown or reset)."""
    if before.entries_read is None or after.entries_read is None:
        return 0
    return max(0, after.entries_read - before.entries_read)


def _hard_reason(limits: Limits, state: PacingState, obs: Observation) -> str | None:
    if obs.paused_flag:
        return "pause flag is set"
    if obs.lag >= limits.lag_pause:
        return f"consumer lag reached hard limit {limits.lag_pause}"
    if state.hysteresis and obs.lag >= limits.resume_below:
        return (
            f"consumer lag above resume level {limits.resume_below} "
            f"after reaching hard limit {limits.lag_pause}"
        )
    return None


def _stopped(
    limits: Limits, state: PacingState, obs: Observation, reason: str, hard: bool = True
) -> tuple[PacingState, Decision]:
    since = state.stopped_since if state.stopped_since is not None else obs.now
    state = replace(state, stopped_since=since, pacing=True)
    waited = obs.now - since
    if waited >= limits.max_pause_s:
        return state, GiveUp(reason, waited)
    return state, Wait(reason, waited, hard)


def _free(limits: Limits, obs: Observation) -> Go:
    """Unpaced: this producer's share of the room up to the set point, in one batch."""
    return Go(budget=max(1, (limits.set_point - obs.lag) // max(1, obs.producers)), rate=None)


def _paced(
    limits: Limits, state: PacingState, obs: Observation, dt: float
) -> tuple[PacingState, Decision]:
    drain = state.drain or 0.0
    kp, ki = _gains(limits, drain)
    error = limits.set_point - obs.lag
    bound = kp * (limits.lag_pause - limits.lag_warn) / ki
    wanted = drain + kp * error + ki * state.integral
    # Anti-windup: integrate only while the output is not pinned at zero by that error.
    integral = state.integral
    if not (wanted <= 0 and error < 0):
        integral = min(bound, max(-bound, integral + error * dt))
    state = replace(state, integral=integral, stopped_since=None)
    rate = (drain + kp * error + ki * integral) / max(1, obs.producers)
    if rate <= 0:
        return state, Wait("lag above set point", 0.0, hard=False)
    headroom = limits.lag_pause - 1 - obs.lag
    step = max(1, int((limits.lag_pause - limits.set_point) * STEP_SHARE))
    budget = max(1, min(headroom, step, math.ceil(rate * BATCH_HORIZON_S)))
    return state, Go(budget=budget, rate=rate)


def _gains(limits: Limits, drain: float) -> tuple[float, float]:
    """``(kp, ki)`` for a fleet draining ``drain`` rows/s: the configured gains, or higher
    so that the proportional term alone stops the producer half way from the set point to
    the stop (``drain = kp x (pause - set_point) / 2``).

    Fixed gains suit limits that are seconds of work; count limits are fewer seconds the
    faster the fleet drains (200 messages are 0.15 s at 1,400 rows/s): the correction must
    then be as fast, or the lag wanders across the whole band before it acts. ``ki`` follows
    ``kp`` squared, so the loop stays as damped as the configured pair."""
    gains = limits.gains
    room = max(1, limits.lag_pause - limits.set_point)
    kp = max(gains.kp, 2 * drain / room)
    return kp, gains.ki * (kp / gains.kp) ** 2
