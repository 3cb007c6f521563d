"""The producer's limits: the zone thresholds turned into the pacing controller's counts.

The controller of :mod:`~sentinel_platform.streams.producer.pacing` works in message counts;
the thresholds of :mod:`~sentinel_platform.streams.backlog.zones` are in seconds of work.
:meth:`BackpressureConfig.limits` is the one place that turns one into the other, at the
fleet's drain rate and for the in-flight allowance the live workers publish, so the
producer paces between the same thresholds ``sentinel status``, the lag sensor and the
checks judge by. The set point is what the fleet holds in flight plus about 1 s of work
(:data:`SET_POINT_SHARE` of ``warn_s``): paced publishing stays nominal. With
Sentinel-L7's ``lag_warn``/``lag_pause`` set, those counts are used as they are.

A pure decision, tested from tables of cases. :class:`BackpressureConfig` is plain
picklable data: it travels to the Spark executors where the guard is built.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.zones import (
    BOOTSTRAP_FACTOR,
    DEFAULT_PAUSE_S,
    DEFAULT_WARN_S,
    ZoneLimits,
    count_limits,
    thresholds,
)
from sentinel_platform.streams.producer.pacing import Limits

#: The time-based set point is this share of ``warn_s`` of work: 1 s with the defaults,
#: half way to the soft limit, so paced publishing stays in the nominal zone.
SET_POINT_SHARE = 0.5
#: Before a drain rate is measured, the producer's safety stop is this many set points.
BOOTSTRAP_PAUSE_FACTOR = 50


@dataclass(frozen=True)
class BackpressureConfig:
    """Thresholds and timings of the guard; plain data so it can travel to Spark executors.

    ``lag_warn``/``lag_pause`` set (Sentinel-L7's message counts): fixed count limits.
    Unset (the default): the limits are ``warn_s``/``pause_s`` seconds of work at the
    fleet's measured drain rate plus the in-flight allowance the workers publish, the same
    thresholds as the lag zones (:func:`~sentinel_platform.streams.backlog.zones.thresholds`);
    the set point is :data:`SET_POINT_SHARE` of ``warn_s``, so a fleet that keeps up stays
    nominal. Before a drain rate is measured the producer fills
    :data:`~sentinel_platform.streams.backlog.zones.BOOTSTRAP_FACTOR` x the allowance, and at
    least that many reads of ``bootstrap_rows`` (``SENTINEL_READ_COUNT``), so the first
    workers have something to read while no worker has published yet.
    """

    lag_warn: int | None = None
    lag_pause: int | None = None
    lag_warn_sleep_ms: int = 500
    lag_pause_poll_ms: int = 100
    max_pause_s: float = 600.0
    resume_lag: int | None = None
    warn_s: float = DEFAULT_WARN_S
    pause_s: float = DEFAULT_PAUSE_S
    bootstrap_rows: int = 100

    def __post_init__(self) -> None:
        self.zone_limits()  # validates the thresholds
        if self.bootstrap_rows < 1:
            raise ValueError(f"bootstrap_rows ({self.bootstrap_rows}) must be at least 1")
        pause = self.lag_pause
        if self.resume_lag is not None and not (
            self.resume_lag >= 0 and (pause is None or self.resume_lag <= pause)
        ):
            raise ValueError(f"resume_lag ({self.resume_lag}) must be in [0, lag_pause]")

    @classmethod
    def from_settings(cls, settings: Settings, resume_lag: int | None = None) -> BackpressureConfig:
        counts = count_limits(settings)
        return cls(
            lag_warn=counts[0] if counts else None,
            lag_pause=counts[1] if counts else None,
            lag_warn_sleep_ms=settings.lag_warn_sleep_ms,
            lag_pause_poll_ms=settings.lag_pause_poll_ms,
            max_pause_s=settings.max_pause_s,
            resume_lag=resume_lag,
            warn_s=settings.lag_warn_s,
            pause_s=settings.lag_pause_s,
            bootstrap_rows=settings.read_count,
        )

    def zone_limits(self, allowance: int = 0) -> ZoneLimits:
        """The zone limits for a fleet whose live workers published ``allowance``."""
        return ZoneLimits(
            warn_s=self.warn_s,
            pause_s=self.pause_s,
            lag_warn=self.lag_warn,
            lag_pause=self.lag_pause,
            in_flight=max(0, allowance),
        )

    def limits(
        self, drain_rate: float | None = None, allowance: int = 0, recent: float | None = None
    ) -> Limits:
        """The controller's limits at the fleet's drain rate (rows/s; None: not measured)
        for the in-flight ``allowance`` the live workers published (0: none did); the set
        point at the ``recent`` rate instead when that is lower (a capacity just cut)."""
        if self.lag_warn is not None and self.lag_pause is not None:
            set_point = (self.lag_warn + self.lag_pause) // 2
            return self._limits(self.lag_warn, set_point, self.lag_pause)
        bounds = thresholds(self.zone_limits(allowance), drain_rate)
        held = max(0, allowance)
        if drain_rate is None or bounds.warn is None or bounds.pause is None:
            # not measured yet: a little more than the fleet holds in flight (at least a
            # read), paced to the controller's own drain estimate; the stop far beyond
            first = max(held, self.bootstrap_rows)
            set_point = BOOTSTRAP_FACTOR * first
            return self._limits(first, set_point, BOOTSTRAP_PAUSE_FACTOR * set_point)
        pause = bounds.pause
        if drain_rate <= 0:  # drained nothing over a whole window: only what is in flight
            most = max(1, held)
            return self._limits(max(1, most // 2), most, max(most + 1, pause))
        steer = min(drain_rate, recent) if recent else drain_rate
        budget = steer * self.warn_s * SET_POINT_SHARE
        set_point = min(pause - 1, held + max(2, math.ceil(budget)))
        soft = max(1, min(set_point - 1, held + math.ceil(budget / 2)))
        return self._limits(soft, set_point, pause)

    def _limits(self, soft: int, set_point: int, pause: int) -> Limits:
        resume = self.resume_lag if self.resume_lag is not None else set_point
        return Limits(
            lag_warn=soft,
            lag_pause=pause,
            set_point=set_point,
            resume_below=min(resume, pause),
            max_pause_s=self.max_pause_s,
        )

    @property
    def set_point(self) -> int:
        """The count set point at the bootstrap rate (count limits: half way between)."""
        return self.limits().set_point

    @property
    def resume_level(self) -> int:
        """Lag below which a lag-driven stop ends, before a drain rate is measured."""
        return self.limits().resume_below
