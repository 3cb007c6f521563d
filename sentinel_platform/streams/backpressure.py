"""The producer's backpressure guard: slow down when workers fall behind, stop when they drown.

Sentinel-L7's guard read the lag key before every XADD, slept a fixed 500 ms above the
soft limit and spun forever above the hard limit. This guard keeps its two thresholds
and its stop-aware waits, and fixes what went wrong:

* **Graduated pacing.** Between ``lag_warn`` and ``lag_pause`` the sleep before a batch
  grows linearly with the lag, from 0 at ``lag_warn`` to ``lag_warn_sleep_ms`` at
  ``lag_pause``, and the batch is cut to the head-room left below ``lag_pause``. A lag of
  51 with a warn of 50 costs almost nothing; a lag of 190 costs nearly the full sleep. A
  fixed sleep either over-brakes at the bottom of the band or under-brakes at the top.
* **Hysteresis.** After a hard stop the producer resumes only once the lag has fallen
  below ``resume_lag`` (default: half way between warn and pause). Resuming at
  ``lag_pause`` itself, as the original did, re-enters the hard limit after one batch and
  produces the stop/go sawtooth the original post describes.
* **No blind flooding.** A missing lag key means no worker is alive; the guard then
  measures the group's backlog itself (:func:`~sentinel_platform.streams.lag.measure_lag`)
  and applies the same limits, so a producer cannot bury a dead pool.
* **Bounded waits.** A hard stop longer than ``max_pause_s`` raises
  :class:`BackpressureTimeout` naming the stream, the lag and the time waited.
* **Interruptible.** Every wait is sliced into steps of at most :data:`STOP_CHECK_S`; between
  steps the guard asks ``should_stop()`` and reads the optional stop key, so a terminated
  Dagster run (or a sibling Spark task that failed) ends a wait within about a second.
* **Pause flag.** ``keys.paused`` (set by the operations sensors) stops the producer like
  the hard limit until the flag is cleared.
* **Own rows count.** A worker writes the lag key at the end of each cycle, so it cannot
  include rows published since; the guard adds the rows it sent after the key was written
  (its age comes from the key's remaining TTL), and caps every batch at the head-room
  below ``lag_pause``. Without this a producer re-reads the same stale "lag 0" and sends
  batch after batch into it.

Soft and hard *episodes* are counted and logged once each (start and end), not once per
batch. The guard works on a Spark executor: :class:`BackpressureConfig` is a plain
picklable dataclass, and the guard itself is built inside the partition function from a
client opened there.

Measured (one consumer at 500 msg/s, 10 s per run, lag sampled every 50 ms, defaults
warn 50 / pause 200 / 500 ms): per-message like the original, the fixed sleep held lag at
32 +- 37.5 and left the consumer idle 2.15 s of 10 (2,140 processed); graduated pacing
held 45.8 +- 5.6 (max 53), idle 0 s, 4,435 processed. In batches of 500: fixed sleep
486 +- 306 (max 999), binary 790 +- 381 (max 1,679), graduated 78 +- 48 (max 199; without
the own-rows correction 400 +- 321, max 1,182). Hysteresis, same setup in batches: resuming
at 200 gave 18 hard stops in 10 s and lag 93 +- 63; resuming below 125 gave 6 and 78 +- 53.

``mode`` exists so the benchmark can compare this guard with its predecessors on equal
terms: ``"graduated"`` (this design), ``"fixed"`` (the original: fixed soft sleep, resume
as soon as lag is below the hard limit) and ``"binary"`` (no soft zone at all).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from sentinel_platform.settings import Settings
from sentinel_platform.streams.connection import RedisClient
from sentinel_platform.streams.keys import StreamKeys
from sentinel_platform.streams.lag import measure_lag
from sentinel_platform.streams.peaks import record_episode, record_lag

log = logging.getLogger(__name__)

Mode = Literal["graduated", "fixed", "binary"]
MODES: tuple[str, ...] = ("graduated", "fixed", "binary")
LagSource = Literal["key", "measured"]
#: Longest uninterrupted sleep: stop requests are noticed at least this often.
STOP_CHECK_S = 0.25
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
    mode: Mode = "graduated"
    lag_key_ttl_s: int = 10

    def __post_init__(self) -> None:
        if not 0 < self.lag_warn < self.lag_pause:
            raise ValueError(
                f"lag_warn ({self.lag_warn}) must be positive and below lag_pause "
                f"({self.lag_pause})"
            )
        if self.mode not in MODES:
            raise ValueError(f"mode {self.mode!r} is not one of {', '.join(MODES)}")
        if self.resume_lag is not None and not 0 <= self.resume_lag <= self.lag_pause:
            raise ValueError(f"resume_lag ({self.resume_lag}) must be in [0, lag_pause]")

    @classmethod
    def from_settings(cls, settings: Settings, **overrides: object) -> BackpressureConfig:
        values: dict[str, object] = {
            "lag_warn": settings.lag_warn,
            "lag_pause": settings.lag_pause,
            "lag_warn_sleep_ms": settings.lag_warn_sleep_ms,
            "lag_pause_poll_ms": settings.lag_pause_poll_ms,
            "max_pause_s": settings.max_pause_s,
            "lag_key_ttl_s": settings.lag_key_ttl_s,
        }
        values.update(overrides)
        return cls(**values)  # type: ignore[arg-type]

    @property
    def resume_level(self) -> int:
        """Lag below which a hard stop ends."""
        if self.resume_lag is not None:
            return self.resume_lag
        if self.mode == "graduated":
            return (self.lag_warn + self.lag_pause) // 2
        return self.lag_pause

    @property
    def soft_exit_level(self) -> int:
        """Lag below which a soft episode ends (for counting and logging only).

        Half the soft limit: a lag hovering around ``lag_warn`` (which is what good pacing
        produces) is one episode, not hundreds of warnings.
        """
        return self.lag_warn // 2

    def soft_sleep_s(self, lag: int) -> float:
        """Pause before a batch in the soft zone (``lag_warn <= lag < lag_pause``)."""
        if self.mode == "binary" or lag < self.lag_warn:
            return 0.0
        if self.mode == "fixed":
            return self.lag_warn_sleep_ms / 1000
        fraction = (lag - self.lag_warn) / (self.lag_pause - self.lag_warn)
        return min(1.0, fraction) * self.lag_warn_sleep_ms / 1000

    def batch_budget(self, lag: int, batch_size: int) -> int:
        """Rows allowed in the next batch: never more than the head-room below the hard limit.

        Without the cap one batch of 500 sent at lag 30 lands the consumers at 530, far past
        the hard limit, and the producer then stops and starts on a sawtooth whatever the
        pacing does.
        """
        if self.mode != "graduated":
            return batch_size
        return max(1, min(batch_size, self.lag_pause - lag))


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
    source: LagSource
    paused_flag: bool
    stop: bool
    unseen: int = 0


@dataclass
class BackpressureGuard:
    """Call :meth:`wait_before_batch` before each batch; it returns how many rows may go."""

    client: RedisClient
    keys: StreamKeys
    config: BackpressureConfig
    should_stop: Callable[[], bool] = lambda: False
    stop_key: str | None = None
    stats: BackpressureStats = field(default_factory=BackpressureStats)
    _soft_since: float | None = field(default=None, init=False, repr=False)
    _sent: deque[tuple[float, int]] = field(default_factory=deque, init=False, repr=False)
    _sleep: Callable[[float], None] = field(default=time.sleep, repr=False)

    # --- reading ----------------------------------------------------------------------
    def read_signal(self) -> Signal:
        pipe = self.client.pipeline(transaction=False)
        pipe.get(self.keys.lag)
        pipe.pttl(self.keys.lag)
        pipe.get(self.keys.paused)
        if self.stop_key:
            pipe.get(self.stop_key)
        values = pipe.execute()
        lag_value, lag_pttl, paused_value = values[0], values[1], values[2]
        stop = bool(self.stop_key and values[3] is not None)
        unseen = 0
        if lag_value is None:
            lag, source = measure_lag(self.client, self.keys).lag, "measured"
        else:
            unseen = self._sent_since_written(int(lag_pttl))
            lag, source = int(lag_value) + unseen, "key"
        paused = paused_value is not None and str(paused_value).strip().lower() not in _FALSE_FLAGS
        if lag > self.stats.max_lag:  # a new high for this guard: keep it for the sensor
            record_lag(self.client, self.keys, lag)
        self.stats.max_lag = max(self.stats.max_lag, lag)
        return Signal(lag=lag, source=source, paused_flag=paused, stop=stop, unseen=unseen)

    def record_sent(self, rows: int) -> None:
        """Note a published batch; see :meth:`_sent_since_written`."""
        if self.config.mode == "graduated":
            self._sent.append((time.monotonic(), rows))

    def _sent_since_written(self, pttl_ms: int) -> int:
        """Rows this producer sent after the worker last wrote the lag key.

        The key is a snapshot taken at the end of a worker's cycle; until the next write it
        cannot include what was published since. The key's remaining TTL tells its age
        (workers write it with ``EX lag_key_ttl_s``), so those rows are added to the reading
        instead of being sent again into the same stale "lag 0". A key without TTL has no
        known age and is taken as current.
        """
        now = time.monotonic()
        horizon = now - self.config.lag_key_ttl_s
        while self._sent and self._sent[0][0] < horizon:
            self._sent.popleft()
        if pttl_ms < 0 or not self._sent:
            return 0
        age_s = max(0.0, self.config.lag_key_ttl_s - pttl_ms / 1000)
        written_at = now - age_s
        return sum(rows for at, rows in self._sent if at >= written_at)

    def _check_stop(self, signal: Signal | None = None) -> None:
        if (signal is not None and signal.stop) or self.should_stop():
            raise PublishInterrupted(f"publish to stream {self.keys.stream!r} was asked to stop")

    def _stoppable_sleep(self, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            self._sleep(min(left, STOP_CHECK_S))
            self._check_stop()

    # --- the decision -------------------------------------------------------------------
    def wait_before_batch(self, batch_size: int = 1) -> int:
        """Block as backpressure requires; return the number of rows the next batch may hold."""
        signal = self.read_signal()
        self._check_stop(signal)
        if signal.paused_flag or signal.lag >= self.config.lag_pause:
            signal = self._hard_stop(signal)
        if self.config.mode != "binary" and signal.lag >= self.config.lag_warn:
            self._slow_down(signal)
        elif signal.lag < self.config.soft_exit_level:
            self._end_soft_episode(signal)
        return self.config.batch_budget(signal.lag, batch_size)

    def _slow_down(self, signal: Signal) -> None:
        if self._soft_since is None:
            self._soft_since = time.monotonic()
            self.stats.soft_events += 1
            record_episode(self.client, self.keys, "soft", signal.lag)
            log.warning(
                "consumer lag above soft limit, slowing down",
                extra=self._fields(signal, limit=self.config.lag_warn),
            )
        pause = self.config.soft_sleep_s(signal.lag)
        if pause > 0:
            started = time.monotonic()
            self._stoppable_sleep(pause)
            self.stats.slowed_s += time.monotonic() - started

    def _end_soft_episode(self, signal: Signal) -> None:
        if self._soft_since is None:
            return
        lasted = time.monotonic() - self._soft_since
        self._soft_since = None
        log.info(
            "consumer lag back to nominal",
            extra=self._fields(signal, episode_s=round(lasted, 3)),
        )

    def _hard_stop(self, signal: Signal) -> Signal:
        started = time.monotonic()
        self.stats.hard_events += 1
        record_episode(self.client, self.keys, "hard", signal.lag)
        # Hysteresis applies to lag-driven stops; a flag-only stop ends when the flag goes.
        resume_below = (
            self.config.resume_level
            if signal.lag >= self.config.lag_pause
            else self.config.lag_pause
        )
        reason = self._reason(signal)
        log.warning(f"{reason}, pausing publish", extra=self._fields(signal))
        poll_s = self.config.lag_pause_poll_ms / 1000
        try:
            while signal.paused_flag or signal.lag >= resume_below:
                waited = time.monotonic() - started
                if waited >= self.config.max_pause_s:
                    raise BackpressureTimeout(self.keys.stream, signal.lag, waited, reason)
                self._stoppable_sleep(min(poll_s, self.config.max_pause_s - waited))
                signal = self.read_signal()
                self._check_stop(signal)
                if signal.lag >= self.config.lag_pause:
                    resume_below = self.config.resume_level
                reason = self._reason(signal)
        finally:
            self.stats.paused_s += time.monotonic() - started
        log.info(
            "publish resumed",
            extra=self._fields(signal, paused_s=round(time.monotonic() - started, 3)),
        )
        return signal

    def _reason(self, signal: Signal) -> str:
        if signal.paused_flag:
            return f"pause flag {self.keys.paused!r} is set"
        where = "consumer lag" if signal.source == "key" else "measured backlog (no live worker)"
        return (
            f"{where} reached hard limit {self.config.lag_pause} "
            f"(resumes below {self.config.resume_level})"
        )

    def _fields(self, signal: Signal, **more: object) -> dict[str, object]:
        return {
            "stream": self.keys.stream,
            "group": self.keys.group,
            "lag": signal.lag,
            "lag_source": signal.source,
            "paused_flag": signal.paused_flag,
            **more,
        }
