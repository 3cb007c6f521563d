"""The producer's backpressure guard: the I/O around the pacing controller.

Before each batch the guard reads, in one pipelined round trip, everything it looks at
(:mod:`~sentinel_platform.streams.producer.backpressure_signal`: the group's state, the lag
key the workers publish, the operators' pause flag and the run's stop key); it steps the
pure controller of :mod:`~sentinel_platform.streams.producer.pacing` and acts on its
decision: send a batch of at most the given size and then keep to the given rate, wait,
or give up.

Contract:

* **Limits.** Taken before each step from the zone thresholds at the fleet's drain rate
  (:meth:`~sentinel_platform.streams.producer.pacing_limits.BackpressureConfig.limits`).
  What the fleet holds in flight is the allowance the live workers publish
  (:mod:`~sentinel_platform.streams.backlog.holdings`), re-read at most every
  :data:`ALLOWANCE_READ_S`: the same figure ``sentinel status``, the lag sensor and the
  checks use, never one computed from this process's settings. The drain rate is measured
  here from the group's completed count (:mod:`~sentinel_platform.streams.backlog.drain`) and
  published for the other readers. Below the soft limit a batch may fill the lag up to the
  set point at once; from the set point on the rate follows the consumers; at the stop (or
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

The guard runs on Spark executors: its config is plain picklable data and the guard is
built inside the partition function from a client opened there.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

import redis

from sentinel_platform.streams.backlog.drain import DrainMeter, queue_drain_rate
from sentinel_platform.streams.backlog.holdings import read_allowance
from sentinel_platform.streams.backlog.peaks import record_episode, record_lag
from sentinel_platform.streams.backlog.zones import ZoneLimits
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform.streams.plumbing.replies import optional_text
from sentinel_platform.streams.producer.backpressure_signal import Signal, read_signal
from sentinel_platform.streams.producer.pacing import (
    GiveUp,
    Go,
    Limits,
    Observation,
    PacingState,
    Wait,
    step,
)
from sentinel_platform.streams.producer.pacing_limits import BackpressureConfig

log = logging.getLogger(__name__)

#: Longest uninterrupted sleep: stop requests are noticed at least this often.
STOP_CHECK_S = 0.25
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


@dataclass
class BackpressureStats:
    """What the guard did, counted per episode (an episode = one stretch in a zone)."""

    soft_events: int = 0
    hard_events: int = 0
    paused_s: float = 0.0
    slowed_s: float = 0.0
    max_lag: int = 0


@dataclass
class BackpressureGuard:
    """Call :meth:`wait_before_batch` before each batch and :meth:`record_sent` after it."""

    client: RedisClient
    keys: StreamKeys
    config: BackpressureConfig
    should_stop: Callable[[], bool] = lambda: False
    stop_key: str | None = None
    #: A sharded stream's shards: measured with the stream (``backpressure_signal``).
    shards: tuple[StreamKeys, ...] = ()
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
        measured = self.shards or (self.keys,)
        self._allowance = sum(read_allowance(self.client, keys) for keys in measured)

    # --- reading ----------------------------------------------------------------------
    def read_signal(self) -> Signal:
        """One reading of the stream and its flags (the signal module's ``read_signal``); a
        new high of the lag is recorded for the lag sensor."""
        limits = self._limits or self.current_limits()
        holds = limits.resume_below if self._state.hysteresis else limits.lag_pause
        signal = read_signal(self.client, self.keys, self.stop_key, self._id, holds, self.shards)
        if signal.lag > self.stats.max_lag:  # a new high for this guard: keep it for the sensor
            record_lag(self.client, self.keys, signal.lag)
            self.stats.max_lag = signal.lag
        return signal

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
