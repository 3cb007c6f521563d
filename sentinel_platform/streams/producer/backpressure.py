"""The producer's backpressure guard: the I/O around the pacing controller.

Before each batch the guard reads, in one pipelined round trip, the group's state
(``XINFO GROUPS``: backlog, pending, ``entries-read``), the lag key the workers publish,
the operators' pause flag and the run's stop key; it steps the pure controller of
:mod:`~sentinel_platform.streams.producer.pacing` and acts on its decision: send a batch of at most
the given size and then keep to the given rate, wait, or give up.

Contract:

* **Lag is measured, the published figure can only stop.** The group's own numbers are
  current to the round trip, so the producer never paces on a stale figure (workers
  write the lag key once per read cycle, which may be a second old). A published figure
  (Sentinel-L7's lag key) at or above ``lag_pause`` still stops the producer, and holds it
  until the figure is below the resume level, so whatever writes it can hold producers.
  Without a group the whole stream counts as backlog.
* **Limits.** In seconds of work by default: before each step the guard turns the zone
  thresholds of :mod:`~sentinel_platform.streams.backlog.zones` at the fleet's drain rate into
  message counts (:meth:`BackpressureConfig.limits`): the set point is what the fleet holds
  in flight plus 1 s of work, the stop the backpressure zone. What the fleet holds in
  flight is the allowance the live workers publish
  (:mod:`~sentinel_platform.streams.backlog.holdings`), re-read at most every
  :data:`ALLOWANCE_READ_S`: the same figure ``sentinel status``, the lag sensor and the
  checks use, never one computed from this process's settings. The drain rate is measured
  here from the group's completed count (:mod:`~sentinel_platform.streams.backlog.drain`) and
  published for the other readers. With Sentinel-L7's ``lag_warn``/``lag_pause`` set, those
  counts are used as they are. Below the soft limit a batch may fill the lag up to the set
  point at once; from the set point on the rate follows the consumers; at the stop (or
  while ``keys.paused`` is set) the producer stops, and after a lag-driven stop resumes
  only below the resume level. A stop, or consumers reading nothing while the lag is
  elevated, longer than ``max_pause_s`` raises :class:`BackpressureTimeout` naming the
  stream, the lag, the reason and the time waited.
* **Interruptible.** Every wait is sliced into steps of at most :data:`STOP_CHECK_S`;
  between steps the guard asks ``should_stop()``, so a terminated Dagster run (or a
  sibling Spark task that failed, through the stop key) ends a wait within about a
  second. A pacing sleep is never longer than ``lag_warn_sleep_ms``, so the controller
  re-reads the lag at least that often.
* **Episodes, not batches.** Soft (pacing) and hard (stopped) episodes are counted,
  recorded for the lag sensor and logged once at start and end.

The guard runs on Spark executors: :class:`BackpressureConfig` is plain picklable data
and the guard is built inside the partition function from a client opened there.
"""

from __future__ import annotations

import contextlib
import logging
import math
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis

from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.drain import (
    DrainMeter,
    completed_count,
    parse_rate,
    queue_drain_rate,
)
from sentinel_platform.streams.backlog.holdings import read_allowance
from sentinel_platform.streams.backlog.lag import GroupState, backlog_from_state, measure_lag
from sentinel_platform.streams.backlog.peaks import record_episode, record_lag
from sentinel_platform.streams.backlog.zones import (
    BOOTSTRAP_FACTOR,
    DEFAULT_PAUSE_S,
    DEFAULT_WARN_S,
    ZoneLimits,
    count_limits,
    thresholds,
)
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, drain_rate_key
from sentinel_platform.streams.plumbing.replies import optional_text
from sentinel_platform.streams.producer.pacing import (
    GiveUp,
    Go,
    Limits,
    Observation,
    PacingState,
    Wait,
    step,
)

log = logging.getLogger(__name__)

#: Longest uninterrupted sleep: stop requests are noticed at least this often.
STOP_CHECK_S = 0.25
#: A producer that has not observed the stream for this long no longer counts for a share.
PRODUCER_TTL_S = 5.0
#: The time-based set point is this share of ``warn_s`` of work: 1 s with the defaults,
#: half way to the soft limit, so paced publishing stays in the nominal zone.
SET_POINT_SHARE = 0.5
#: Before a drain rate is measured, the producer's safety stop is this many set points.
BOOTSTRAP_PAUSE_FACTOR = 50
#: The set point also follows the rate of the last this many seconds when it is lower: a
#: fleet whose capacity was cut is steered to within it, not after the published rate's
#: whole window. The stop stays at the window's rate: a short window sees a ``Retry-After``
#: hold as a collapse, and a stop there would be a false hard episode.
FAST_WINDOW_S = 2.0
#: The measured drain rate is written at most this often per producer.
RATE_WRITE_S = 0.5
#: The workers' published in-flight allowance is re-read at most this often (workers
#: publish it about as often, with their lag).
ALLOWANCE_READ_S = 1.0
_FALSE_FLAGS = frozenset({"", "0", "false", "no", "off"})


class BackpressureTimeout(RuntimeError):
    """The producer stayed stopped longer than ``max_pause_s``."""

    def __init__(self, stream: str, lag: int, waited_s: float, reason: str) -> None:
        self.stream = stream
        self.lag = lag
        self.waited_s = waited_s
        super().__init__(
            f"backpressure on stream {stream!r}: {reason} (lag {lag}) for {waited_s:.1f}s, "
            f"longer than SENTINEL_MAX_PAUSE_S; giving up the publish"
        )


class PublishInterrupted(RuntimeError):
    """The publish was asked to stop (run terminated, or a sibling task failed)."""


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


@dataclass
class BackpressureStats:
    """What the guard did, counted per episode (an episode = one stretch in a zone)."""

    soft_events: int = 0
    hard_events: int = 0
    paused_s: float = 0.0
    slowed_s: float = 0.0
    max_lag: int = 0


@dataclass(frozen=True)
class Signal:
    """One reading of everything the guard looks at (one pipelined round trip)."""

    lag: int
    entries_read: int | None
    paused_flag: bool
    stop: bool
    producers: int = 1
    #: The group's finished count (read minus pending), for the drain rate.
    completed: int | None = None
    #: The drain rate another producer (or this one) published, rows/s.
    published_rate: float | None = None


def producers_key(keys: StreamKeys) -> str:
    """Producers that observed the stream lately (member: producer id, score: ms)."""
    return f"{keys.lag}:producers"


@dataclass
class BackpressureGuard:
    """Call :meth:`wait_before_batch` before each batch and :meth:`record_sent` after it."""

    client: RedisClient
    keys: StreamKeys
    config: BackpressureConfig
    should_stop: Callable[[], bool] = lambda: False
    stop_key: str | None = None
    stats: BackpressureStats = field(default_factory=BackpressureStats)
    clock: Callable[[], float] = field(default=time.monotonic, repr=False)
    _sleep: Callable[[float], None] = field(default=time.sleep, repr=False)
    _state: PacingState = field(default_factory=PacingState, init=False, repr=False)
    _sent: int = field(default=0, init=False, repr=False)
    _next_at: float = field(default=0.0, init=False, repr=False)
    _soft_since: float | None = field(default=None, init=False, repr=False)
    _id: str = field(default_factory=lambda: uuid.uuid4().hex, init=False, repr=False)
    _meter: DrainMeter = field(default_factory=DrainMeter, init=False, repr=False)
    _fast: DrainMeter = field(
        default_factory=lambda: DrainMeter(window_s=FAST_WINDOW_S), init=False, repr=False
    )
    _rate: float | None = field(default=None, init=False, repr=False)
    _recent: float | None = field(default=None, init=False, repr=False)
    _rate_written_at: float | None = field(default=None, init=False, repr=False)
    _limits: Limits | None = field(default=None, init=False, repr=False)
    _allowance: int = field(default=0, init=False, repr=False)
    _allowance_read_at: float | None = field(default=None, init=False, repr=False)

    @property
    def drain_rate(self) -> float | None:
        """The fleet's drain rate the limits are taken at (rows/s; None: not measured)."""
        return self._rate

    @property
    def allowance(self) -> int:
        """The in-flight allowance the live workers published, as last read."""
        return self._allowance

    def current_limits(self) -> Limits:
        """The controller's limits at the drain rate and the allowance known now."""
        return self.config.limits(self._rate, self._allowance, self._recent)

    def zone_limits(self) -> ZoneLimits:
        """The zone limits the guard paces between now (the published allowance)."""
        return self.config.zone_limits(self._allowance)

    def _refresh_allowance(self, now: float) -> None:
        """Re-read the workers' published allowance, at most every
        :data:`ALLOWANCE_READ_S` (count limits do not use it: never read then)."""
        if self.config.lag_pause is not None:
            return
        read_at = self._allowance_read_at
        if read_at is not None and now - read_at < ALLOWANCE_READ_S:
            return
        self._allowance_read_at = now
        self._allowance = read_allowance(self.client, self.keys)

    # --- reading ----------------------------------------------------------------------
    def read_signal(self) -> Signal:
        pipe = self.client.pipeline(transaction=False)
        pipe.get(self.keys.lag)
        pipe.get(self.keys.paused)
        pipe.get(self.stop_key or self.keys.paused)
        pipe.xinfo_groups(self.keys.stream)
        pipe.xlen(self.keys.stream)
        pipe.get(drain_rate_key(self.keys))
        self._register(pipe)
        values = pipe.execute(raise_on_error=False)
        lag_key, paused_value, stop_value, groups, length, rate_value = values[:6]
        for value in values[6:]:
            if isinstance(value, Exception):
                raise value
        stop = bool(self.stop_key and stop_value is not None)
        measured, entries_read, pending = self._measure(groups, length)
        published = int(lag_key) if lag_key is not None else 0
        limits = self._limits or self.current_limits()
        holds = limits.resume_below if self._state.hysteresis else limits.lag_pause
        lag = max(measured, published) if published >= holds else measured
        paused = paused_value is not None and str(paused_value).strip().lower() not in _FALSE_FLAGS
        if lag > self.stats.max_lag:  # a new high for this guard: keep it for the sensor
            record_lag(self.client, self.keys, lag)
            self.stats.max_lag = lag
        producers = max(1, int(values[-2]))
        published_rate = None if isinstance(rate_value, Exception) else parse_rate(rate_value)
        completed = completed_count(entries_read, pending)
        return Signal(lag, entries_read, paused, stop, producers, completed, published_rate)

    def _update_rate(self, signal: Signal, now: float) -> None:
        """Fold the reading into the drain rate; publish a fresh measurement now and then."""
        measured = self._meter.observe(now, signal.completed, signal.lag)
        self._recent = self._fast.observe(now, signal.completed, signal.lag) or None
        if measured is None:
            if signal.published_rate is not None:
                self._rate = signal.published_rate
            return
        self._rate = measured
        written = self._rate_written_at
        if written is None or now - written >= RATE_WRITE_S:
            self._rate_written_at = now
            pipe = self.client.pipeline(transaction=False)
            queue_drain_rate(pipe, self.keys, measured, signal.lag)
            pipe.execute()

    def _register(self, pipe: Any) -> None:
        """Mark this producer alive and count the live ones (the share of the rate)."""
        key = producers_key(self.keys)
        now_ms = int(time.time() * 1000)
        pipe.zadd(key, {self._id: now_ms})
        pipe.zremrangebyscore(key, "-inf", now_ms - PRODUCER_TTL_S * 1000)
        pipe.zcard(key)
        pipe.pexpire(key, int(PRODUCER_TTL_S * 2000))

    def _measure(self, groups: Any, length: Any) -> tuple[int, int | None, int]:
        """Backlog + pending, ``entries-read`` and pending of the group (``XINFO GROUPS``)."""
        if isinstance(groups, redis.ResponseError):  # no stream yet
            return 0, None, 0
        if isinstance(groups, Exception):
            raise groups
        group: dict[str, Any] | None = next(
            (g for g in groups if g["name"] == self.keys.group), None
        )
        if group is None:
            return int(length), None, 0
        read = group.get("entries-read")
        state = GroupState(
            length=int(length),
            pending=int(group.get("pending", 0)),
            lag=group.get("lag"),
            last_delivered_id=str(group.get("last-delivered-id", "0-0")),
            entries_read=None if read is None else int(read),
        )
        backlog = backlog_from_state(state)
        if backlog is None:  # an entry after the group's position was deleted: count
            return measure_lag(self.client, self.keys).lag, state.entries_read, state.pending
        return backlog + state.pending, state.entries_read, state.pending

    def record_sent(self, rows: int) -> None:
        """Count a published batch."""
        self._sent += rows

    # --- waiting ----------------------------------------------------------------------
    def _check_stop(self, signal: Signal | None = None) -> None:
        if (signal is not None and signal.stop) or self.should_stop():
            raise PublishInterrupted(self._stop_message())

    def _stop_message(self) -> str:
        """Why we stop, with the reason kept in the stop key by whoever set it (a sibling
        task that gave up, the driver): Spark reports the first task to fail, which may
        be this one, so the cause must travel with it."""
        message = f"publish to stream {self.keys.stream!r} was asked to stop"
        reason = None
        if self.stop_key:
            with contextlib.suppress(redis.RedisError):
                reason = optional_text(self.client.get(self.stop_key))
        return f"{message}: {reason}" if reason and reason != "1" else message

    def _stoppable_sleep(self, seconds: float) -> None:
        deadline = self.clock() + seconds
        while (left := deadline - self.clock()) > 0:
            self._sleep(min(left, STOP_CHECK_S))
            self._check_stop()

    def _keep_pace(self) -> None:
        """Sleep until the paced rate allows the next batch (never longer than the cap)."""
        left = min(self._next_at - self.clock(), self.config.lag_warn_sleep_ms / 1000)
        if left > 0:
            started = self.clock()
            self._stoppable_sleep(left)
            self.stats.slowed_s += self.clock() - started

    # --- the decision -------------------------------------------------------------------
    def wait_before_batch(self, batch_size: int = 1) -> int:
        """Block as backpressure requires; return the number of rows the next batch may hold."""
        self._keep_pace()
        stopped_at: float | None = None
        hard = False
        try:
            while True:
                signal = self.read_signal()
                self._check_stop(signal)
                now = self.clock()
                self._update_rate(signal, now)
                self._refresh_allowance(now)
                limits = self._limits = self.current_limits()
                observation = Observation(
                    signal.lag, signal.entries_read, now, signal.paused_flag, signal.producers
                )
                self._state, decision = step(limits, self._state, observation)
                if isinstance(decision, Go):
                    self._track_soft(signal)
                    rows = min(batch_size, decision.budget)
                    self._next_at = now + rows / decision.rate if decision.rate else now
                    if stopped_at is not None:
                        self._resumed(signal, stopped_at)
                    return rows
                if isinstance(decision, GiveUp):
                    raise BackpressureTimeout(
                        self.keys.stream, signal.lag, decision.waited_s, decision.reason
                    )
                if stopped_at is None and not self._soft_or_hold(decision, signal):
                    stopped_at, hard = now, True
                self._stoppable_sleep(self._poll_s(decision))
        finally:
            if stopped_at is not None and hard:
                self.stats.paused_s += self.clock() - stopped_at

    def _poll_s(self, decision: Wait) -> float:
        poll = self.config.lag_pause_poll_ms / 1000
        return max(0.001, min(poll, self.config.max_pause_s - decision.waited_s))

    def _soft_or_hold(self, decision: Wait, signal: Signal) -> bool:
        """True for a wait inside pacing (counted as slowed); False starts a hard episode."""
        if not decision.hard:
            self._track_soft(signal)
            return True
        self.stats.hard_events += 1
        record_episode(self.client, self.keys, "hard", signal.lag)
        log.warning(f"{decision.reason}, pausing publish", extra=self._fields(signal))
        return False

    def _resumed(self, signal: Signal, stopped_at: float) -> None:
        log.info(
            "publish resumed",
            extra=self._fields(signal, paused_s=round(self.clock() - stopped_at, 3)),
        )

    def _track_soft(self, signal: Signal) -> None:
        """Count and log a pacing episode once at its start and once at its end."""
        pacing = self._state.pacing
        if pacing and self._soft_since is None:
            self._soft_since = self.clock()
            self.stats.soft_events += 1
            record_episode(self.client, self.keys, "soft", signal.lag)
            log.warning(
                "consumer lag above soft limit, pacing to the consumers",
                extra=self._fields(signal, limit=self._limits.set_point if self._limits else None),
            )
        elif not pacing and self._soft_since is not None:
            lasted = self.clock() - self._soft_since
            self._soft_since = None
            log.info(
                "consumer lag back to nominal",
                extra=self._fields(signal, episode_s=round(lasted, 3)),
            )

    def _fields(self, signal: Signal, **more: object) -> dict[str, object]:
        return {
            "stream": self.keys.stream,
            "group": self.keys.group,
            "lag": signal.lag,
            "paused_flag": signal.paused_flag,
            **more,
        }
