"""A circuit breaker for the analyzer: a small state machine, no I/O, an injected clock.

A dead or overloaded analyzer costs every message its timeout (seconds) before the rules
decide; with many messages in flight that is most of a worker's time, and the load only
makes the analyzer's recovery slower. The breaker turns "the analyzer keeps failing"
into "do not ask it for a while":

* **closed**: every call goes through. ``failures`` consecutive failures (errors or
  timeouts; a success resets the count) open it for ``cooldown_s``.
* **open**: calls are refused at once, until the cool-down ends.
* **half_open**: the first caller after the cool-down gets the only **probe**; everyone
  else is still refused until the probe reports. Its success closes the breaker, its
  failure opens it for another full cool-down.

A busy analyzer (HTTP 429, a 503 with ``Retry-After``) is *up*: its answer is neither a
failure nor a success of the closed breaker (:meth:`CircuitBreaker.busy`), and a probe
that meets one closes the breaker, since the analyzer answered. Holding off a busy
analyzer is the fleet hold's job (:mod:`workers.analyzer.limits.fleet_limits`), not the breaker's. A
call that never went out (no local connection free in time) teaches nothing
(:meth:`CircuitBreaker.released`); a probe released so goes back for the next caller.
Results are matched to the state they were admitted in: a call admitted before
the breaker opened (or any call but the probe in half-open) that reports late neither
closes it nor counts as a failure of the new period, so a burst of slow, stale replies
cannot flip it.

The methods return the :class:`Transition` they caused (or None) instead of logging, so
the whole machine is tested from tables with a hand-moved clock and the caller decides
how to log and count. One lock makes every method atomic: a worker's threads share one
breaker.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

State = Literal["closed", "open", "half_open"]
#: Gauge values: the higher, the less the analyzer is asked.
STATE_VALUES: dict[State, int] = {"closed": 0, "half_open": 1, "open": 2}


@dataclass(frozen=True)
class Transition:
    """A change of state: to ``state`` from ``previous``, why, and for how long it stays
    open (``cooldown_s``; 0 for the other states)."""

    state: State
    previous: State
    reason: str
    cooldown_s: float


@dataclass(frozen=True)
class Ticket:
    """Permission for one call; hand it back with the call's outcome."""

    generation: int
    probe: bool


@dataclass(frozen=True)
class Admission:
    """The answer to :meth:`CircuitBreaker.admit`: a ticket (go ahead) or None (fail at
    once, ``retry_in_s`` until the breaker may let a probe through), and the transition
    the admission caused (open -> half_open for the probe)."""

    ticket: Ticket | None
    transition: Transition | None = None
    retry_in_s: float = 0.0


class CircuitBreaker:
    """Thread-safe breaker; see the module docstring for the states and rules."""

    def __init__(
        self, failures: int, cooldown_s: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        if failures < 1:
            raise ValueError(f"failures must be at least 1, got {failures}")
        if cooldown_s <= 0:
            raise ValueError(f"cooldown_s must be positive, got {cooldown_s}")
        self.failures = failures
        self.cooldown_s = cooldown_s
        self._clock = clock
        self._lock = threading.Lock()
        self._state: State = "closed"
        # Bumped on every change of state: a ticket of an older generation is stale.
        self._generation = 0
        self._consecutive = 0
        self._open_until = 0.0

    @property
    def state(self) -> State:
        """The state as of the last call (an open breaker past its cool-down still says
        ``open`` until someone asks to call); :meth:`state_now` is what is true now."""
        with self._lock:
            return self._state

    def state_now(self) -> State:
        """What is true now, for a gauge read at any time: ``open`` only while calls are
        refused (its cool-down running), ``half_open`` while the probe is out. An open
        breaker past its cool-down refuses nothing (the next call goes out, as the
        probe), so it reads ``closed``: on an idle stream no call ever moves the machine
        on, and "open" as of the last call would say so, and alert, for ever."""
        with self._lock:
            if self._state == "open" and self._clock() >= self._open_until:
                return "closed"
            return self._state

    def admit(self) -> Admission:
        """May a call go out now? Open past its cool-down becomes half-open with this
        caller as the probe."""
        with self._lock:
            if self._state == "closed":
                return Admission(Ticket(self._generation, probe=False))
            now = self._clock()
            if self._state == "open" and now >= self._open_until:
                transition = self._move("half_open", "cool-down over", 0.0)
                return Admission(Ticket(self._generation, probe=True), transition)
            return Admission(None, retry_in_s=max(0.0, self._open_until - now))

    def succeeded(self, ticket: Ticket) -> Transition | None:
        """A call answered: resets the failure count; the probe's success closes."""
        with self._lock:
            if ticket.generation != self._generation:
                return None
            if self._state == "half_open" and ticket.probe:
                self._consecutive = 0
                return self._move("closed", "probe succeeded", 0.0)
            if self._state == "closed":
                self._consecutive = 0
            return None

    def failed(self, ticket: Ticket, reason: str) -> Transition | None:
        """A call failed (error or timeout): the N-th in a row, or the probe, opens."""
        with self._lock:
            if ticket.generation != self._generation:
                return None
            if self._state == "half_open" and ticket.probe:
                return self._open(self.cooldown_s, f"probe failed: {reason}")
            if self._state != "closed":
                return None
            self._consecutive += 1
            if self._consecutive < self.failures:
                return None
            why = f"{self._consecutive} consecutive failures, last: {reason}"
            return self._open(self.cooldown_s, why)

    def busy(self, ticket: Ticket) -> Transition | None:
        """The analyzer answered "busy": it is up. The probe's busy answer closes the
        breaker; for any other call nothing changes (the failure count included)."""
        with self._lock:
            if ticket.generation != self._generation:
                return None
            if self._state == "half_open" and ticket.probe:
                self._consecutive = 0
                return self._move("closed", "probe answered: busy, but up", 0.0)
            return None

    def released(self, ticket: Ticket) -> Transition | None:
        """The call was never sent: nothing is learnt. A probe goes back, so the next
        caller probes at once (open with no cool-down left) instead of nobody ever."""
        with self._lock:
            if ticket.generation != self._generation:
                return None
            if self._state == "half_open" and ticket.probe:
                return self._open(0.0, "probe not sent (no free connection)")
            return None

    def _open(self, seconds: float, reason: str) -> Transition:
        self._open_until = self._clock() + seconds
        self._consecutive = 0
        return self._move("open", reason, seconds)

    def _move(self, state: State, reason: str, cooldown_s: float) -> Transition:
        transition = Transition(state, self._state, reason, cooldown_s)
        self._state = state
        self._generation += 1
        return transition
