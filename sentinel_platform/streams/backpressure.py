"""The producer's backpressure guard: the I/O around the pacing controller.

Before each batch the guard reads, in one pipelined round trip, the group's state
(``XINFO GROUPS``: backlog, pending, ``entries-read``), the lag key the workers publish,
the operators' pause flag and the run's stop key; it steps the pure controller of
:mod:`~sentinel_platform.streams.pacing` and acts on its decision: send a batch of at most
the given size and then keep to the given rate, wait, or give up.

Contract:

* **Lag is measured, the published figure can only stop.** The group's own numbers are
  current to the round trip, so the producer never paces on a stale figure (workers
  write the lag key once per read cycle, which may be a second old). A published figure
  (Sentinel-L7's lag key) at or above ``lag_pause`` still stops the producer, and holds it
  until the figure is below the resume level, so whatever writes it can hold producers.
  Without a group the whole stream counts as backlog.
* **Limits.** Below ``lag_warn`` a batch may fill the lag up to the set point at once;
  from the set point on the rate follows the consumers; at ``lag_pause`` (or while
  ``keys.paused`` is set) the producer stops, and after a lag-driven stop resumes only
  below the resume level. A stop, or consumers reading nothing while the lag is
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

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis

from sentinel_platform.settings import Settings
from sentinel_platform.streams.connection import RedisClient
from sentinel_platform.streams.keys import StreamKeys
from sentinel_platform.streams.lag import GroupState, backlog_from_state, measure_lag
from sentinel_platform.streams.pacing import (
    GiveUp,
    Go,
    Limits,
    Observation,
    PacingState,
    Wait,
    step,
)
from sentinel_platform.streams.peaks import record_episode, record_lag

log = logging.getLogger(__name__)

#: Longest uninterrupted sleep: stop requests are noticed at least this often.
STOP_CHECK_S = 0.25
#: A producer that has not observed the stream for this long no longer counts for a share.
PRODUCER_TTL_S = 5.0
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
    """Thresholds and timings of the guard; plain data so it can travel to Spark executors."""

    lag_warn: int = 50
    lag_pause: int = 200
    lag_warn_sleep_ms: int = 500
    lag_pause_poll_ms: int = 100
    max_pause_s: float = 600.0
    resume_lag: int | None = None

    def __post_init__(self) -> None:
        if not 0 < self.lag_warn < self.lag_pause:
            raise ValueError(
                f"lag_warn ({self.lag_warn}) must be positive and below lag_pause "
                f"({self.lag_pause})"
            )
        if self.resume_lag is not None and not 0 <= self.resume_lag <= self.lag_pause:
            raise ValueError(f"resume_lag ({self.resume_lag}) must be in [0, lag_pause]")

    @classmethod
    def from_settings(cls, settings: Settings, resume_lag: int | None = None) -> BackpressureConfig:
        return cls(
            lag_warn=settings.lag_warn,
            lag_pause=settings.lag_pause,
            lag_warn_sleep_ms=settings.lag_warn_sleep_ms,
            lag_pause_poll_ms=settings.lag_pause_poll_ms,
            max_pause_s=settings.max_pause_s,
            resume_lag=resume_lag,
        )

    @property
    def set_point(self) -> int:
        """The lag pacing steers to: half way between the soft and the hard limit.

        Far enough above ``lag_warn`` that the consumers always have a queue to read, far
        enough below ``lag_pause`` that a rate error is corrected before the safety stop.
        """
        return (self.lag_warn + self.lag_pause) // 2

    @property
    def resume_level(self) -> int:
        """Lag below which a lag-driven stop ends (hysteresis: not the hard limit itself)."""
        return self.resume_lag if self.resume_lag is not None else self.set_point

    def limits(self) -> Limits:
        return Limits(
            lag_warn=self.lag_warn,
            lag_pause=self.lag_pause,
            set_point=self.set_point,
            resume_below=self.resume_level,
            max_pause_s=self.max_pause_s,
        )


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

    # --- reading ----------------------------------------------------------------------
    def read_signal(self) -> Signal:
        pipe = self.client.pipeline(transaction=False)
        pipe.get(self.keys.lag)
        pipe.get(self.keys.paused)
        pipe.get(self.stop_key or self.keys.paused)
        pipe.xinfo_groups(self.keys.stream)
        pipe.xlen(self.keys.stream)
        self._register(pipe)
        values = pipe.execute(raise_on_error=False)
        lag_key, paused_value, stop_value, groups, length = values[:5]
        for value in values[5:]:
            if isinstance(value, Exception):
                raise value
        stop = bool(self.stop_key and stop_value is not None)
        measured, entries_read = self._measure(groups, length)
        published = int(lag_key) if lag_key is not None else 0
        holds = self.config.resume_level if self._state.hysteresis else self.config.lag_pause
        lag = max(measured, published) if published >= holds else measured
        paused = paused_value is not None and str(paused_value).strip().lower() not in _FALSE_FLAGS
        if lag > self.stats.max_lag:  # a new high for this guard: keep it for the sensor
            record_lag(self.client, self.keys, lag)
            self.stats.max_lag = lag
        producers = max(1, int(values[-2]))
        return Signal(lag, entries_read, paused, stop, producers)

    def _register(self, pipe: Any) -> None:
        """Mark this producer alive and count the live ones (the share of the rate)."""
        key = producers_key(self.keys)
        now_ms = int(time.time() * 1000)
        pipe.zadd(key, {self._id: now_ms})
        pipe.zremrangebyscore(key, "-inf", now_ms - PRODUCER_TTL_S * 1000)
        pipe.zcard(key)
        pipe.pexpire(key, int(PRODUCER_TTL_S * 2000))

    def _measure(self, groups: Any, length: Any) -> tuple[int, int | None]:
        """Backlog + pending and ``entries-read`` of the group from its ``XINFO GROUPS``."""
        if isinstance(groups, redis.ResponseError):  # no stream yet
            return 0, None
        if isinstance(groups, Exception):
            raise groups
        group: dict[str, Any] | None = next(
            (g for g in groups if g["name"] == self.keys.group), None
        )
        if group is None:
            return int(length), None
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
            return measure_lag(self.client, self.keys).lag, state.entries_read
        return backlog + state.pending, state.entries_read

    def record_sent(self, rows: int) -> None:
        """Count a published batch."""
        self._sent += rows

    # --- waiting ----------------------------------------------------------------------
    def _check_stop(self, signal: Signal | None = None) -> None:
        if (signal is not None and signal.stop) or self.should_stop():
            raise PublishInterrupted(f"publish to stream {self.keys.stream!r} was asked to stop")

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
        limits = self.config.limits()
        stopped_at: float | None = None
        hard = False
        try:
            while True:
                signal = self.read_signal()
                self._check_stop(signal)
                now = self.clock()
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
                extra=self._fields(signal, limit=self.config.lag_warn),
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
