"""What a worker publishes beside its work: the lag key, the peaks record, its holding.

One pipeline, one round trip (:meth:`LagWriter.write`), written from the loop at most every
:data:`LAG_WRITE_INTERVAL_S` and by the heartbeat's side-write thread, so a worker that
is up says so even while a long call holds its loop:

* the lag key: Sentinel-L7's plain integer, with a TTL, that the producer paces by;
* the peaks record the lag sensor reports between its ticks
  (:mod:`~sentinel_platform.streams.backlog.peaks`);
* this worker's holding: the most messages it may hold at the limit in force
  (``Calls.capacity``), which the fleet adds up into its in-flight allowance
  (:mod:`~sentinel_platform.streams.backlog.holdings`), never into the lag key, and
  whether its adaptive limit is still climbing (:class:`Climb`).

These are side writes: a refusal (a peaks key of the wrong type, a full server) is logged
(``side_write_failed``, rate-limited) and never holds up the loop or the lease. The limit
in force is a metric, and a change of it is logged at most once per write
(``limit_changed``), never per message.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

import redis

from sentinel_platform.logs import BoundLogger
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.holdings import queue_holding
from sentinel_platform.streams.backlog.lag import measure_lag, queue_lag_key
from sentinel_platform.streams.backlog.peaks import queue_record_lag
from sentinel_platform.streams.consumer.calling.adaptive_limit import AdaptiveLimit
from sentinel_platform.streams.consumer.calling.claims import Claims
from sentinel_platform.streams.consumer.calling.in_flight import Calls
from sentinel_platform.streams.consumer.healing.heartbeat_writes import SideWriteFailures
from sentinel_platform.streams.consumer.metrics import Metrics
from sentinel_platform.streams.plumbing.connection import FAILOVER_ERRORS, RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys

log = logging.getLogger(__name__)

#: Lag key writes from the loop are at most this frequent (the heartbeat adds its own).
LAG_WRITE_INTERVAL_S = 0.1
#: A climb ends when the limit is cut below this share of the highest limit it reached.
CLIMB_ENDS_BELOW = 0.75


class Climb:
    """Whether an adaptive limit is still climbing, from the steady limits published.

    Climbing: below its maximum, its last rise no longer ago than ``memory_s`` of work
    (the start counts as one: ``auto`` starts low by design), and never cut below
    :data:`CLIMB_ENDS_BELOW` of the highest limit of this climb since. Time with nothing to
    do does not count: an idle limit is not being tested, so a worker started long before
    the first publish (``sentinel up``, then a run) still climbs when its first burst lands,
    instead of reporting backpressure while it probes a slow analyzer. A fleet that fell
    behind shows a limit that stopped rising or was cut; only a limit still finding its
    level is not backpressure. A small dip is not a cut: the limit's gradient is measured
    from noisy latencies, and ending the claim on one noisy step turned a burst the worker
    was absorbing into advice to raise its concurrency. ``memory_s`` is the holding's TTL,
    so a climb is claimed no longer than a figure of it would live. Safe from the loop and
    the heartbeat's thread.
    """

    def __init__(self, memory_s: float, clock: Callable[[], float] = time.monotonic) -> None:
        self._memory_s = memory_s
        self._clock = clock
        self._lock = threading.Lock()
        self._last: int | None = None
        self._high = 0
        self._rose_at = clock()
        self._rising = True

    def observe(self, limit: object, idle: bool = False) -> bool:
        """Fold in the limit in force now (``idle``: the stream has nothing to do); True
        while it is climbing."""
        if not isinstance(limit, AdaptiveLimit):
            return False
        return self.observe_steady(limit.steady_limit, limit.maximum, idle)

    def observe_steady(self, steady: int, maximum: int, idle: bool = False) -> bool:
        """Fold in a steady limit of ``maximum``; True while it is climbing."""
        now = self._clock()
        with self._lock:
            if idle and self._rising:
                self._rose_at = now  # the climb's clock stands still while there is no work
            if self._last is not None and steady > self._last:
                if not self._rising:  # a new climb starts from here
                    self._high = 0
                self._rising, self._rose_at = True, now
            elif steady < CLIMB_ENDS_BELOW * self._high:
                self._rising = False  # a cut, not a dip
            self._last, self._high = steady, max(self._high, steady)
            recent = now - self._rose_at <= self._memory_s
            return self._rising and recent and steady < maximum


class LagWriter:
    """The side writes of one consumer; safe from the loop and the heartbeat's thread."""

    def __init__(
        self,
        client: RedisClient,
        keys: StreamKeys,
        settings: Settings,
        consumer: str,
        metrics: Metrics,
        calls: Calls,
        count: int,
        log_fields: dict[str, str],
        claims: Claims | None = None,
    ) -> None:
        self.client = client
        self.keys = keys
        self.settings = settings
        self.consumer = consumer
        self.metrics = metrics
        self.calls = calls
        self.count = count  # the read size
        self.log = BoundLogger(log, log_fields)
        self.failures = SideWriteFailures(log_fields)
        #: the consumer's claims, refreshed with every write (None: no paid calls)
        self.claims = claims
        self._next = 0.0
        self.climb = Climb(settings.lag_key_ttl_s)

    def write(self) -> int:
        """Measure the lag and publish the three; the lag."""
        reading = measure_lag(self.client, self.keys)
        pipe = self.client.pipeline(transaction=False)
        queue_lag_key(pipe, self.keys, reading.lag, self.settings.lag_key_ttl_s)
        queue_record_lag(pipe, self.keys, reading.lag)  # the sensor reports peaks between ticks
        holding = self.calls.capacity(self.count)
        climbing = self.climb.observe(self.calls.limit, idle=reading.lag == 0)
        ttl = self.settings.lag_key_ttl_s
        queue_holding(pipe, self.keys, self.consumer, holding, ttl, climbing)
        if self.claims is not None:
            self.claims.queue_refresh(pipe)  # a claim lives as long as its holder writes
        pipe.execute()
        self.metrics.set_gauge("lag", reading.lag)
        self.log.debug(
            "lag_written",
            extra={"lag": reading.lag, "backlog": reading.backlog},
        )
        return reading.lag

    def maybe_write(self) -> None:
        """From the loop: :meth:`write_quietly` and the limit, at most every interval."""
        now = time.monotonic()
        if now >= self._next:
            self._next = now + LAG_WRITE_INTERVAL_S
            self.write_quietly()
            self.log_limit()

    def write_quietly(self) -> None:
        """:meth:`write` as the side write it is: a refusal is logged, never raised.
        Redis unreachable or failing over is raised: the caller's outage handling applies."""
        try:
            self.write()
        except redis.ResponseError as exc:
            if isinstance(exc, FAILOVER_ERRORS):
                raise
            self.failures.failed("lag", exc)
        else:
            self.failures.succeeded("lag")

    def log_limit(self) -> None:
        """The limit in force as a metric; a change of it logged once."""
        limit = self.calls.limit
        self.metrics.set_gauge("in_flight_limit", limit.steady_limit)
        change = limit.change()
        if change is not None:
            self.log.info(
                "limit_changed",
                extra={
                    "limit": change.limit,
                    "previous": change.previous,
                    "reason": change.reason,
                },
            )
