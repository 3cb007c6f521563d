"""How many calls one worker may have in flight: a fixed number, or one found at run time.

:class:`AdaptiveLimit` is the gradient concurrency limit of Envoy's adaptive concurrency
filter (after Netflix's concurrency-limits), sampled in windows as Netflix's
``WindowedLimit`` does, with an explicit cut on drops. A hosted analyzer either queues
(latency grows past its capacity) or refuses (429 at once): the gradient follows the
first, the drop rules the second.

* **Windows.** Completed calls are gathered until the window holds
  ``min(WINDOW_SAMPLES, limit)`` and has lasted one round trip (at least
  ``WINDOW_MIN_S``); its latency is the **median**, so one slow outlier moves nothing.
* **Gradient.** ``gradient = noload * (1 + BUFFER) / sample`` clamped to
  ``[GRADIENT_MIN, GRADIENT_MAX]``. Below 1 the limit is multiplied by it; from 1 up it
  grows by up to ``limit * (gradient - 1) + HEADROOM``. After the first cut growth is
  also bounded by a step that starts at 1 after each cut and doubles per growing window
  (slow start, then probing): multiplicative cuts with additive growth are what make
  workers sharing one service converge to equal shares (Chiu and Jain's AIMD). A window
  whose calls never used half the limit (Netflix's "app-limited") may cut, never grow: a
  worker short of messages says nothing about the service.
* **No-load latency** is measured in a *probe*: the limit is pinned to ``PROBE_LIMIT``
  until ``PROBE_SAMPLES`` calls started at that level have completed; their median is
  ``noload``. The first window is a probe (a limit starting above capacity would take
  the queue as the norm), then one every ``max(PROBE_INTERVAL_S, PROBE_INTERVAL_RTTS x
  noload)``, so a service that became slower or faster is re-measured.
* **Tiny latencies** are raised to ``RTT_FLOOR_S`` first: below it timings are scheduler
  noise, so a CPU-bound processor is never cut (:attr:`AdaptiveLimit.instant`).
* **Drops** (429, 503 with ``Retry-After``, a timeout) cut at once in
  :meth:`AdaptiveLimit.on_drop`. The drops until the next window closes are one *burst*
  (a hold stops every call), unless a refused call went out ``NEW_ROUND_S`` after the
  burst began: sent after the burst's cut (the round after a ``Retry-After`` hold), it
  starts a burst of its own. The limit loses one per refusal, at least ``1 -
  DROP_FACTOR`` of itself and, with fewer than ``COLLAPSE_DROPS`` refusals, at most
  ``BURST_FLOOR``. A burst is what this worker sent beyond what the service held, so a
  collapse of capacity is followed in one burst and workers sharing a service are cut in
  proportion to their shares. A burst that comes before the service answered one round
  of calls at the level the last cut left is cut to half at least: refused again, the
  last cut was not enough (calls that go out one by one as earlier ones finish show a
  collapse only a few refusals per hold), but not below the calls of ours the service
  held when it refused (the refused call's ``in_flight`` less itself).
* **Ceilings.** The level a drop leaves is a ceiling for ``CEILING_HOLD_S``, then one
  call above it is tried; a window completed there without a drop forgets it. A refusing
  service gives no latency signal and every refusal costs the fleet its ``Retry-After``.
  :meth:`AdaptiveLimit.on_hold` (a call not sent because *another* worker was refused)
  sets the same ceiling without a cut, so a fleet stops growing, and probes, together.

The limit stays within ``minimum`` (at least 1) and ``maximum`` (the settings'
``worker_concurrency_max``) and starts at ``initial`` (``DEFAULT_INITIAL`` for
:func:`limit_for`). :meth:`AdaptiveLimit.change` hands the caller the net change at most
once per ``log_interval_s``. :class:`FixedLimit` has the same interface for a pinned
number, so the consumer has one path for both. The constants' reasons and the
simulations behind them are in the project's concurrency guide.

**Threads.** Neither class locks or starts a thread: the consumer calls them from its one
loop thread (it owns the instance). A caller on several threads must hold one lock around
every call.
"""

from __future__ import annotations

import math
import statistics
import time
from collections.abc import Callable

from sentinel_platform.streams.consumer.calling.concurrency_limit import (
    ConcurrencyLimit,
    FixedLimit,
    LimitChange,
)

#: Latencies below this are raised to it: scheduler noise, not queueing.
RTT_FLOOR_S = 0.002
#: Calls a window needs (fewer while the limit is lower), as Netflix's ``WindowedLimit``.
WINDOW_SAMPLES = 10
#: The shortest window, as Envoy's ``concurrency_update_interval``.
WINDOW_MIN_S = 0.1
#: Latency within ``noload x (1 + BUFFER)`` counts as no queue (Envoy's default is 25%).
BUFFER = 0.2
#: The gradient's bounds: at most halve, at most double per window (Envoy's).
GRADIENT_MIN = 0.5
GRADIENT_MAX = 2.0
#: Added to the limit in a window that grows it (one more call to try).
HEADROOM = 1.0
#: Calls in flight while the no-load latency is measured (Envoy's ``min_concurrency``).
PROBE_LIMIT = 3
#: Calls a no-load measurement takes the median of.
PROBE_SAMPLES = 10
#: How often the no-load latency is measured again: this long, and this many no-load
#: latencies, whichever is longer.
PROBE_INTERVAL_S = 30.0
PROBE_INTERVAL_RTTS = 100
#: On a drop the limit is cut to at most this fraction (Netflix's AIMD back-off ratio).
DROP_FACTOR = 0.9
#: One burst of drops cuts the limit by the calls refused, to at most this fraction of it,
#: unless it has this many: the service's capacity fell, and the count says by how much.
BURST_FLOOR = 0.5
COLLAPSE_DROPS = 4
#: A refusal of a call sent this long after a burst began is a burst of its own: the call
#: went out after the burst's cut. Refusals come back in milliseconds; the margin covers
#: the time a finished call waits to be collected.
NEW_ROUND_S = 0.1
#: After a drop, how long the limit stays at or below the level the drop left.
CEILING_HOLD_S = 20.0
#: ``limit`` of a worker on ``auto`` before the first measurement (capped by ``maximum``).
DEFAULT_INITIAL = 8


class AdaptiveLimit:
    """The gradient limit described in this module's docstring; single-threaded.

    The consumer, for every processor call it starts (one message in hand):

    * starts it only while its calls in flight are fewer than :attr:`limit` (a cut never
      interrupts calls already running; they simply are not replaced);
    * counts ``in_flight`` when the call **starts**, the call itself included (the first
      of an idle worker is 1), and keeps it with the call;
    * when the call completes, calls :meth:`on_sample` with the call's wall time in
      seconds and that count, if the call did its work (an answer, an error that is not
      a drop, a verdict of the processor alone when no analyzer is configured);
    * when it ends in a drop (429, 503 with ``Retry-After``, a timeout), calls
      :meth:`on_drop` with that count and the call's wall time instead;
    * reports neither for a call that never reached the downstream or got no answer
      from it (a message acknowledged as a duplicate without a call, a rules fallback of
      a down analyzer or an open breaker: ``outcomes.is_sample``): its wall time says
      nothing about the service, and a probe of such instant calls would learn a
      no-load latency of milliseconds and read the service's real latency as a queue;
    * logs :meth:`change` when it returns one (at most once per ``log_interval_s``),
      and publishes :attr:`steady_limit` (not :attr:`limit`, which a probe pins low for
      a moment) as the limit in force.
    """

    def __init__(
        self,
        *,
        initial: int,
        maximum: int,
        minimum: int = 1,
        clock: Callable[[], float] = time.monotonic,
        log_interval_s: float = 10.0,
    ) -> None:
        if not 1 <= minimum <= maximum:
            raise ValueError(f"need 1 <= minimum <= maximum, got {minimum} and {maximum}")
        if not minimum <= initial <= maximum:
            raise ValueError(f"initial limit {initial} is outside [{minimum}, {maximum}]")
        self.minimum, self.maximum = minimum, maximum
        self._clock = clock
        self._log_interval_s = log_interval_s
        self._limit = float(initial)
        self.noload_s: float | None = None
        # Window being filled.
        self._samples: list[float] = []
        self._window_peak = 0
        self._window_start = clock()
        self._window_min_s = WINDOW_MIN_S
        # Drops since the last window closed: one burst, cut once by its size.
        self._burst_base: float | None = None
        self._burst_drops = 0
        self._burst_at = 0.0
        # Calls answered since the last cut, and the level it left: a burst that comes
        # before one round at that level was answered halves (``on_drop``).
        self._answered = 0
        self._cut_level = 0.0
        self._again = False
        # Probe: the limit saved while pinned low, the clean samples so far.
        self._saved: float | None = initial
        self._probe: list[float] = []
        self._next_probe = math.inf
        # Most the next growing window may add: unbounded until the first cut (the
        # gradient alone, multiplicative), then 1, doubled by every window that grows.
        self._step = math.inf
        # Ceiling left by the last drop, and until when it holds.
        self._ceiling: int | None = None
        self._ceiling_until = 0.0
        # Change reporting.
        self._reported = initial
        self._reported_at = -math.inf
        self._reason = "probe"

    @property
    def limit(self) -> int:
        """Calls the consumer may have in flight now."""
        if self._saved is not None:  # pinned low, never above the limit it interrupts
            return max(self.minimum, min(PROBE_LIMIT, int(self._saved)))
        return int(self._limit)

    @property
    def steady_limit(self) -> int:
        """The limit outside a probe (a probe pins :attr:`limit` to 3 for about ten
        calls): the figure to publish, show and log."""
        return int(self._saved if self._saved is not None else self._limit)

    @property
    def instant(self) -> bool:
        """True once the no-load latency was measured below ``RTT_FLOOR_S``: the calls
        are CPU-bound (the rules, a no-op), more of them at once cannot make them faster,
        and a consumer may run them on its own thread rather than hand them to others.
        The limit itself is never cut for such calls (see the module docstring)."""
        return self.noload_s is not None and self.noload_s <= RTT_FLOOR_S

    @property
    def probing(self) -> bool:
        """True while the limit is pinned low to measure the no-load latency."""
        return self._saved is not None

    def on_sample(self, rtt_s: float, in_flight: int) -> None:
        """A call that started with ``in_flight`` calls in flight (itself included)
        completed normally after ``rtt_s`` seconds."""
        rtt = rtt_s if rtt_s > RTT_FLOOR_S else RTT_FLOOR_S
        now = self._clock()
        self._answered += 1
        if self._saved is not None:
            self._probe_sample(rtt, in_flight, now)
            return
        self._samples.append(rtt)
        if in_flight > self._window_peak:
            self._window_peak = in_flight
        if (
            len(self._samples) >= min(WINDOW_SAMPLES, self._limit)
            and now - self._window_start >= self._window_min_s
        ):
            self._close_window(now)

    def on_drop(self, in_flight: int, rtt_s: float) -> None:
        """A call that started with ``in_flight`` calls in flight was refused (429, 503
        with ``Retry-After``) or timed out after ``rtt_s`` seconds: cut now (by the
        burst, see the module docstring), and hold the level for a while."""
        current = self._in_force()
        now = self._clock()
        if self._burst_base is not None and now - rtt_s > self._burst_at + NEW_ROUND_S:
            self._burst_base = None  # sent after this burst's cut: that cut was not enough
        if self._burst_base is None:
            self._burst_base, self._burst_drops, self._burst_at = current, 0, now
            self._again = self._answered < self._cut_level  # the last cut was not enough
        self._burst_drops += 1
        base = self._burst_base
        drops = self._burst_drops
        floor = 0.0 if drops >= COLLAPSE_DROPS else base * BURST_FLOOR  # capacity fell
        target = min(base * DROP_FACTOR, max(base - drops, floor))
        if self._again:  # halve, but not below what the service held of ours at once
            target = min(target, max(base * BURST_FLOOR, in_flight - 1.0))
        self._step = 1.0
        if target >= current:
            return
        self._lower_to(max(float(self.minimum), target))
        self._hold_at(target)
        self._cut_level, self._answered = target, 0
        self._reason = "drop"

    def on_hold(self) -> None:
        """Another caller of the service was refused (the fleet is held by its
        ``Retry-After``): no cut, but grow no higher than the level in force for
        ``CEILING_HOLD_S``. During a probe the level in force is the probe's: the fleet
        was refused with this worker at it, so the probe does not end with a return to a
        higher level."""
        level = self._in_force()
        self._lower_to(level)
        self._hold_at(level)
        self._step = 1.0

    def _in_force(self) -> float:
        """The level calls are started at now: the probe's pin while probing."""
        if self._saved is not None:
            return min(self._saved, float(self.limit))
        return self._limit

    def _lower_to(self, level: float) -> None:
        if self._saved is not None:
            self._saved = min(self._saved, level)
        else:
            self._limit = min(self._limit, level)

    def _hold_at(self, level: float) -> None:
        self._ceiling = max(int(level), self.minimum)
        self._ceiling_until = self._clock() + CEILING_HOLD_S

    def change(self) -> LimitChange | None:
        """The change of :attr:`steady_limit` since the last one returned, if it moved
        and the last one is at least ``log_interval_s`` old; else None. Call it as often
        as convenient."""
        now = self._clock()
        current = self.steady_limit
        if current == self._reported or now - self._reported_at < self._log_interval_s:
            return None
        change = LimitChange(self._reported, current, self._reason)
        self._reported, self._reported_at = current, now
        return change

    # --- windows -------------------------------------------------------------------------

    def _close_window(self, now: float) -> None:
        sample = statistics.median(self._samples)
        peak = self._window_peak
        self._samples = []
        self._window_peak = 0
        self._window_start = now
        self._window_min_s = max(WINDOW_MIN_S, sample)
        self._burst_base = None
        if now >= self._next_probe:
            self._start_probe()
            return
        self._update(sample, peak, now)

    def _update(self, sample: float, peak: int, now: float) -> None:
        assert self.noload_s is not None  # set by the first probe, before any window
        gradient = self.noload_s * (1 + BUFFER) / sample
        gradient = min(max(gradient, GRADIENT_MIN), GRADIENT_MAX)
        limit = self._limit
        if gradient < 1.0:
            new, reason = limit * gradient, "latency"
            self._step = 1.0
        elif peak < limit / 2:
            return  # app-limited: nothing learnt about the service's capacity
        else:
            new = limit + min(limit * (gradient - 1) + HEADROOM, self._step)
            new, reason = self._under_ceiling(limit, new, now), "growth"
            self._step *= 2
        new = min(max(new, float(self.minimum)), float(self.maximum))
        if int(new) != int(limit):
            self._reason = reason
        self._limit = new

    def _under_ceiling(self, limit: float, new: float, now: float) -> float:
        """``new`` bounded by the ceiling a drop left: no higher while it holds, then one
        above it; a window that completed above it without a drop forgets it."""
        if self._ceiling is None:
            return new
        if int(limit) > self._ceiling:
            self._ceiling = None
            return new
        if now < self._ceiling_until:
            return min(new, max(limit, float(self._ceiling)))
        return min(new, float(self._ceiling + 1))

    # --- probes --------------------------------------------------------------------------

    def _start_probe(self) -> None:
        self._saved = self._limit
        self._probe = []
        self._reason = "probe"

    def _probe_sample(self, rtt: float, in_flight: int, now: float) -> None:
        if in_flight > self.limit:
            return  # started before the pin: its latency includes the old load
        self._probe.append(rtt)
        if len(self._probe) < PROBE_SAMPLES:
            return
        self.noload_s = statistics.median(self._probe)
        assert self._saved is not None
        self._limit, self._saved = self._saved, None
        self._probe = []
        self._samples, self._window_peak = [], 0
        self._window_start = now
        self._window_min_s = max(WINDOW_MIN_S, self.noload_s)
        self._next_probe = now + max(PROBE_INTERVAL_S, PROBE_INTERVAL_RTTS * self.noload_s)


def limit_for(
    pinned: int | None, maximum: int, clock: Callable[[], float] = time.monotonic
) -> ConcurrencyLimit:
    """The consumer's limit: :class:`FixedLimit` for a pinned number (the settings'
    ``worker_concurrency_pinned``), else :class:`AdaptiveLimit` up to ``maximum``."""
    if pinned is not None:
        return FixedLimit(pinned)
    return AdaptiveLimit(initial=min(DEFAULT_INITIAL, maximum), maximum=maximum, clock=clock)
