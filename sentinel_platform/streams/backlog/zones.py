"""The lag zones, in seconds of queued work: one definition for every reader.

The producer's pacing, the lag card and the ``consumer_lag_within_limits`` check, the lag
sensor and its alerts, and ``sentinel status`` all judge a stream's lag with
:func:`zone` (and the producer paces between the :func:`thresholds` it gives).

A count of messages means nothing on its own: 200 messages are minutes of work for a
processor that takes seconds each and 11 ms for one that takes 50 µs. So by default the
limits are *time to drain*: the lag divided by the fleet's measured drain rate
(``sentinel:drain_rate:<stream>``, written by the producers, see
:mod:`~sentinel_platform.streams.backlog.drain`). The zones, for a lag ``L`` and a drain rate
``r`` rows/s:

* ``L <= in_flight`` is always nominal. ``in_flight`` is the fleet's *in-flight
  allowance*: what the live workers hold by design, as each of them publishes it
  (:mod:`~sentinel_platform.streams.backlog.holdings`; its whole read at a concurrency of 1,
  at most its threads above, the limit in force when it changes at run time). Measured,
  never computed from the settings; 0 when no worker published (everything pending is
  pressure then).
* Past that allowance, ``in_flight + r x SENTINEL_LAG_WARN_S`` starts *elevated* and
  ``in_flight + r x SENTINEL_LAG_PAUSE_S`` starts *backpressure*.
* No drain rate measured (``r`` unknown: no producer watched the fleet work lately, and
  the group did read something in the last minute): the time to drain cannot be told, and
  a fleet that consumes is not alarmed about; nominal. A producer without a rate publishes
  at most :data:`BOOTSTRAP_FACTOR` x ``in_flight`` (at least one read) ahead (see
  ``BackpressureConfig``).
* A rate of 0 while the lag is past the allowance means the consumers drained nothing
  while work waited (over the producer's drain window, or a minute of the group's read
  counter): backpressure (the "consumers stopped" rule).
* A live worker whose adaptive limit is still climbing (``climbing``, published with its
  holding) takes more at once with every round trip: the drain rate of now understates
  the fleet, so a lag past the pause threshold is *elevated* at most, never backpressure
  (a limit still growing is not the fleet falling behind). Pinned limits never climb.
* ``SENTINEL_LAG_WARN`` / ``SENTINEL_LAG_PAUSE`` (Sentinel-L7's message counts), when set,
  replace all of the above: ``L >= lag_warn`` elevated, ``L >= lag_pause`` backpressure.

A missing lag (no live worker) is ``worker_off`` in every mode.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Literal

from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.holdings import most_held
from sentinel_platform.streams.backlog.lag import Zone

#: Defaults of ``SENTINEL_LAG_WARN_S`` / ``SENTINEL_LAG_PAUSE_S`` (seconds of queued work).
DEFAULT_WARN_S = 2.0
DEFAULT_PAUSE_S = 10.0
#: Without a measured drain rate a producer publishes up to this many times ``in_flight``.
BOOTSTRAP_FACTOR = 2
#: When only one Sentinel-L7 count limit is set, the other keeps their ratio (50 / 200).
COUNT_RATIO = 4

Unit = Literal["seconds", "messages"]


@dataclass(frozen=True)
class ZoneLimits:
    """What the zones are judged against; ``lag_warn``/``lag_pause`` set: count limits."""

    warn_s: float = DEFAULT_WARN_S
    pause_s: float = DEFAULT_PAUSE_S
    lag_warn: int | None = None
    lag_pause: int | None = None
    in_flight: int = 0
    #: A live worker's adaptive limit is still climbing: backpressure is elevated at most.
    climbing: bool = False

    def __post_init__(self) -> None:
        if not 0 < self.warn_s < self.pause_s:
            raise ValueError(
                f"warn_s ({self.warn_s}) must be positive and below pause_s ({self.pause_s})"
            )
        if (self.lag_warn is None) != (self.lag_pause is None):
            raise ValueError("lag_warn and lag_pause are set together (or neither)")
        counted = self.lag_warn is not None and self.lag_pause is not None
        if counted and not 0 < (self.lag_warn or 0) < (self.lag_pause or 0):
            raise ValueError(
                f"lag_warn ({self.lag_warn}) must be positive and below lag_pause "
                f"({self.lag_pause})"
            )
        if self.in_flight < 0:
            raise ValueError(f"in_flight ({self.in_flight}) must not be negative")

    @property
    def unit(self) -> Unit:
        return "messages" if self.lag_pause is not None else "seconds"

    def describe(self) -> str:
        """``warn 2 s, pause 10 s of work`` or ``warn 50, pause 200 messages``."""
        if self.lag_warn is not None and self.lag_pause is not None:
            return f"warn {self.lag_warn}, pause {self.lag_pause} messages"
        return f"warn {self.warn_s:g} s, pause {self.pause_s:g} s of work"


@dataclass(frozen=True)
class Thresholds:
    """The lag (messages) at which elevated and backpressure start, for one drain rate.

    None: no lag alone reaches that zone (no drain rate measured).
    """

    warn: int | None
    pause: int | None


def count_limits(settings: Settings) -> tuple[int, int] | None:
    """Sentinel-L7's ``(lag_warn, lag_pause)`` when either is set (the other derived at
    :data:`COUNT_RATIO`), else None: the time limits apply."""
    warn, pause = settings.lag_warn, settings.lag_pause
    if warn is None and pause is None:
        return None
    if pause is None:
        assert warn is not None
        pause = warn * COUNT_RATIO
    if warn is None:
        warn = max(1, pause // COUNT_RATIO)
    return warn, pause


def limits_from_settings(
    settings: Settings, allowance: int = 0, climbing: bool = False
) -> ZoneLimits:
    """The zone limits of ``settings`` for a fleet whose live workers published that they
    hold ``allowance`` messages in flight
    (:func:`~sentinel_platform.streams.backlog.holdings.read_allowance`), one of whose
    limits may still be ``climbing``.

    A climb excuses a lag only under the time limits, whose counts grow with what the
    workers hold. Sentinel-L7's count limits are refused at start-up unless the pause limit
    is above the most the fleet can hold in flight (:func:`in_flight_problem`), so a lag at
    that limit is a backlog no climb absorbs, and the producers have stopped for it."""
    counts = count_limits(settings)
    return ZoneLimits(
        warn_s=settings.lag_warn_s,
        pause_s=settings.lag_pause_s,
        lag_warn=counts[0] if counts else None,
        lag_pause=counts[1] if counts else None,
        in_flight=max(0, allowance),
        climbing=climbing and counts is None,
    )


def thresholds(limits: ZoneLimits, drain_rate: float | None) -> Thresholds:
    """The message counts the zones change at, for the fleet's drain rate (rows/s)."""
    if limits.lag_warn is not None and limits.lag_pause is not None:
        return Thresholds(limits.lag_warn, limits.lag_pause)
    allowance = limits.in_flight
    if drain_rate is None:
        return Thresholds(warn=None, pause=None)
    if drain_rate <= 0:
        return Thresholds(warn=allowance + 1, pause=allowance + 1)
    warn = allowance + max(1, math.ceil(drain_rate * limits.warn_s))
    pause = allowance + max(2, math.ceil(drain_rate * limits.pause_s))
    return Thresholds(warn=warn, pause=max(warn + 1, pause))


def zone(lag: int | None, drain_rate: float | None, limits: ZoneLimits) -> Zone:
    """The zone of ``lag`` (None: no live worker) at ``drain_rate`` rows/s (None: unknown)."""
    if lag is None:
        return "worker_off"
    bounds = thresholds(limits, drain_rate)
    if bounds.pause is not None and lag >= bounds.pause and not limits.climbing:
        return "backpressure"
    if bounds.pause is not None and lag >= bounds.pause:
        return "elevated"  # capacity the climbing limit has not reached yet
    if bounds.warn is not None and lag >= bounds.warn:
        return "elevated"
    return "nominal"


def work_seconds(lag: int, drain_rate: float | None) -> float | None:
    """Seconds the fleet needs to drain ``lag`` (None: no rate, or a lag nothing drains)."""
    if lag <= 0:
        return 0.0
    if drain_rate is None or drain_rate <= 0:
        return None
    return round(lag / drain_rate, 3)


def in_flight_problem(settings: Settings, workers: int = 1, who: str = "the fleet") -> str | None:
    """Why ``settings`` cannot work for ``workers`` workers, or None.

    Limits in seconds of work (the default) add the allowance the workers publish at run
    time, whatever it is: nothing to refuse. Sentinel-L7's count limits
    (``SENTINEL_LAG_PAUSE``, set or derived from ``SENTINEL_LAG_WARN``) are compared with
    the lag as they are, so a pause limit at or below what the workers hold at their most
    pauses the producers whenever the fleet is merely busy. What a worker holds at its most
    is known before it runs (:func:`~sentinel_platform.streams.backlog.holdings.most_held`:
    its whole read at a pinned concurrency of 1, the pinned number and its read-ahead
    above, a read with ``auto``, whose limit count limits cap at the read size:
    :func:`auto_maximum`); limits the operator set are never changed: the combination is
    refused, naming the settings.
    """
    counts = count_limits(settings)
    if counts is None:
        return None
    each = most_held(settings.read_count, pinned_or_read(settings))
    held = each * max(1, workers)
    if counts[1] > held:
        return None
    source = "SENTINEL_LAG_PAUSE" if settings.lag_pause is not None else "SENTINEL_LAG_WARN x 4"
    if settings.worker_concurrency_pinned is None:
        per_worker = (
            f"SENTINEL_READ_COUNT ({settings.read_count}) per worker (SENTINEL_WORKER_CONCURRENCY "
            "is auto, which under count limits holds at most a read)"
        )
        lower = "SENTINEL_READ_COUNT"
    elif settings.worker_concurrency == 1:
        per_worker = (
            f"SENTINEL_READ_COUNT ({settings.read_count}) per worker (at "
            "SENTINEL_WORKER_CONCURRENCY (1) a worker holds its whole read)"
        )
        lower = "SENTINEL_READ_COUNT"
    else:
        per_worker = (
            f"{each} per worker (SENTINEL_WORKER_CONCURRENCY ({settings.worker_concurrency}) "
            f"calls and a read-ahead of {each - settings.worker_concurrency})"
        )
        lower = "SENTINEL_WORKER_CONCURRENCY"
    return (
        f"{source} ({counts[1]}) must be above what {who} can hold in flight: "
        f"{per_worker} x {max(1, workers)} worker(s) = {held}; raise SENTINEL_LAG_PAUSE, "
        f"lower {lower}, or unset SENTINEL_LAG_WARN and SENTINEL_LAG_PAUSE for limits in "
        "seconds of work (docs/backpressure.md)"
    )


def auto_maximum(settings: Settings) -> int:
    """The most calls ``auto`` may have in flight: ``SENTINEL_WORKER_CONCURRENCY_MAX``, or
    with Sentinel-L7's count limits at most a read (``SENTINEL_READ_COUNT``), so that a
    worker on the default holds no more than one on the old default (a read) and a pause
    limit that suited it still does."""
    if count_limits(settings) is None:
        return settings.worker_concurrency_max
    return min(settings.worker_concurrency_max, settings.read_count)


def pinned_or_read(settings: Settings) -> int:
    """The concurrency that bounds what a worker holds under count limits: the pinned
    number, or for ``auto`` its maximum there (:func:`auto_maximum`)."""
    pinned = settings.worker_concurrency_pinned
    return pinned if pinned is not None else auto_maximum(settings)
