"""Limits every worker of a fleet shares for one downstream service (the analyzer).

A hosted model API has one capacity for all its callers. Two limits follow from it, both
kept in Redis so that every worker process sees them at once:

* **The hold.** When the service answers ``Retry-After: S`` to any worker, no worker
  calls it for ``S`` seconds: one key with a TTL of ``S`` (``PX``), set only if the new
  hold ends later than the one already there (a server-side script: compare ``PTTL`` and
  ``SET`` in one step); a hold of no length (``seconds=None``) lasts until an operator
  ends it (``sentinel analyzer release``). The key holds a record of why (cause, reason,
  the analyzer's id and redacted URL: :mod:`~sentinel_platform.streams.operators.analyzer_holds`,
  whose registry every worker joins at start-up so operators find every hold). Before
  each call a client checks it cheaply: the key is re-read at most every
  ``HOLD_REFRESH_S``, by one thread at a time, and the threads that arrive meanwhile
  *wait for that read* rather than go ahead, so a worker that starts during a hold makes
  no call at all. Between reads the last answer stands, and a read that finds the key
  gone ends a remembered hold (an operator released it). A held call is handed back for
  at most ``HOLD_RECHECK_S``, so the messages resume soon after a release. Remaining
  time comes from ``PTTL``, so workers' clocks never need to agree.
* **The rate limit** (optional, calls per second across the fleet): GCRA, the generic
  cell rate algorithm, in one server-side script on one key holding the theoretical
  arrival time (TAT) of the next call in the server's clock (as the key's expiry time,
  so an idle limiter leaves no key behind and needs no ``TIME``). Each call
  *reserves* the next free slot and gets back how long to wait for it, so callers are
  served in the order they reached Redis, whichever worker they are on (fair by
  construction, no retry storm, one round trip per call). A slot further away than
  :func:`wait_bound` is not reserved: the caller raises :class:`Busy` with the wait, and
  the message waits in the consumer loop instead of holding a thread. The wait is
  reported as a wait for a turn (``waited_for_turn``), so the hang watchdog and the
  in-flight limit leave it out, and the worker's stop (:meth:`FleetLimits.bind_stop`)
  ends it: no call is made after a stop.

The keys are derived from the service's identity (:func:`analyzer_key_id`: an explicit
id, or a hash of the URL's scheme, host, port and path, never of its user-info or query,
which may carry credentials). Each script touches one key, so it runs on a Redis Cluster.

Without a Redis client (:meth:`FleetLimits.bind` not called) the hold still holds every
thread of this process and the rate limit is not enforced (logged once). A Redis error
while reading the hold fails open (the service itself will say 429 again); one while
reserving a rate slot fails closed (:class:`Busy`): a limit that cannot be checked must
not be exceeded.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from sentinel_platform.redaction import redact_url, scrub
from sentinel_platform.settings import ANALYZER_MIN_RATE_PER_S as MIN_RATE_PER_S
from sentinel_platform.streams.consumer.processor import Busy, waited_for_turn
from sentinel_platform.streams.operators import analyzer_holds as holds
from sentinel_platform.streams.operators.analyzer_holds import analyzer_key_id
from sentinel_platform.streams.plumbing.connection import RedisClient
from workers.analyzer.limits.fleet_scripts import GCRA_SCRIPT, HOLD_SCRIPT

__all__ = [
    "EXHAUSTED",
    "FleetBusy",
    "FleetExhausted",
    "FleetHeld",
    "FleetLimits",
    "analyzer_key_id",
    "hold_view",
    "wait_bound",
]

log = logging.getLogger(__name__)

#: How stale a worker's view of the fleet's hold may be: a hold another worker sets, or
#: an operator's release, reaches this one within this long (a few calls' worth at most).
HOLD_REFRESH_S = 0.1
#: The longest a held message is handed back for before it is tried again (from memory,
#: no call): a long hold's messages resume within this long of its release.
HOLD_RECHECK_S = 1.0
#: The longest a thread waits for another thread's read of the hold (a Redis round trip
#: bounded by the client's socket timeout); past it the call is held for one recheck.
HOLD_READ_WAIT_S = 10.0
#: A rate-limit slot this close is waited for on the calling thread; a later one is
#: handed back as ``Busy``. Long enough that a fleet running at its rate limit with
#: hundreds of calls queued still reserves in order (fairness), short against the
#: shutdown timeout and the hang watchdog, so a stop is never held up by a sleeping call.
RATE_WAIT_BOUND_S = 1.0
#: The highest rate limit: the limiter's first slot is a key with a TTL of one interval,
#: and a TTL is whole milliseconds.
MAX_RATE_PER_S = 1000.0


class FleetBusy(Busy):
    """Not sent: the fleet is held, or its rate limit has no slot for this call yet."""

    sent = False


class FleetHeld(FleetBusy):
    """Not sent: the analyzer refused a call of the fleet (this worker's or another's) and
    its ``Retry-After`` holds every worker; the consumer's limit stops growing."""

    shared_refusal = True

    def __init__(
        self,
        retry_after_s: float | None,
        reason: str,
        cause: str = holds.RETRY_AFTER,
        left_s: float | None = None,
    ) -> None:
        super().__init__(retry_after_s, reason)
        #: the hold's cause, and its seconds left (None: until released), for the log
        self.cause = cause
        self.left_s = left_s

    def __reduce__(self) -> Any:
        return (type(self), (self.retry_after_s, self.reason, self.cause, self.left_s))


class FleetExhausted(FleetHeld):
    """Not sent: the analyzer told a worker of the fleet that it is exhausted (a quota
    spent, a key rejected), so every worker stops calling it until the answer's reset or
    until an operator releases the hold. What the message gets follows
    ``SENTINEL_ANALYZER_WHEN_DOWN``, decided by the client."""


#: The cause of a hold set because the analyzer said it is exhausted.
EXHAUSTED = "exhausted"


def wait_bound(rate_limit: float) -> float:
    """The longest wait for a rate-limit slot taken on the calling thread: at least
    ``RATE_WAIT_BOUND_S``, and at least one and a half intervals, so that even a rate
    below one call a second lets a caller reserve the next slot."""
    return max(RATE_WAIT_BOUND_S, 1.5 / rate_limit)


def hold_view(now: float, held_until: float, next_read: float) -> tuple[float, bool]:
    """What a client knows of the hold at ``now``: the seconds left of the hold it
    remembers (``held_until``; ``inf`` for one without an end), and whether it must
    re-read the shared key: once the refresh interval since the last read is over,
    *whether or not* a hold is remembered, since an operator may have released it."""
    return max(0.0, held_until - now), now >= next_read


def held_message(analyzer_id: str, left: float, cause: str) -> str:
    """The reason of a :class:`FleetHeld`: which analyzer, for how long, why."""
    span = "until released" if math.isinf(left) else f"for {left:.2f}s"
    return f"analyzer {analyzer_id} held {span} ({cause})"


class FleetLimits:
    """The hold and the rate limit of one analyzer, for all the threads of one worker.

    :meth:`check_hold` and :meth:`reserve` are called before every call; :meth:`hold`
    after an answer asking for quiet. Thread-safe; Redis is asked at most once per
    ``refresh_s`` for the hold (by one thread, while the others wait for its answer) and
    once per call for a rate slot. ``analyzer_url`` is shown to operators, redacted.
    """

    def __init__(
        self,
        analyzer_id: str,
        rate_limit: float | None = None,
        client: RedisClient | None = None,
        *,
        analyzer_url: str = "",
        refresh_s: float = HOLD_REFRESH_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if rate_limit is not None and not MIN_RATE_PER_S <= rate_limit <= MAX_RATE_PER_S:
            raise ValueError(
                f"rate limit must be at least {MIN_RATE_PER_S:.4g}/s (one call a minute) "
                f"and at most {MAX_RATE_PER_S:g}/s, got {rate_limit}"
            )
        self.analyzer_id = analyzer_id
        self.analyzer = redact_url(analyzer_url) if analyzer_url else ""
        self.rate_limit = rate_limit
        self.hold_key = holds.hold_key(analyzer_id)
        self.rate_key = holds.rate_key(analyzer_id)
        self.refresh_s = refresh_s
        self._client = client
        self._clock = clock
        self._lock = threading.Lock()
        self._read_lock = threading.Lock()  # one reader of the hold key at a time
        self._held_until = 0.0
        self._cause = holds.RETRY_AFTER
        self._reason = ""  # the remembered hold's stored reason
        self._holds_set = 0  # bumped by hold(): a read begun before must not undo it
        self._next_read = 0.0
        self._redis_ok = True
        self._unbound_warned = False
        self._closed = threading.Event()
        self._stop = self._closed

    def bind(self, client: RedisClient) -> None:
        """Share the limits through ``client`` from now on (once, at start-up), and add
        this analyzer to the fleet's registry, so operators find its holds."""
        self._client = client
        try:
            holds.register(client, self.analyzer_id, self.analyzer)
        except redis.RedisError as exc:
            self._redis_failed("analyzer_not_registered", exc)

    def bind_stop(self, stop: threading.Event) -> None:
        """The worker's stop (once, at start-up): it ends any wait for a rate slot, and
        no call is made once it is set."""
        self._stop = stop

    def close(self) -> None:
        """Wake a wait for a rate slot (it raises :class:`FleetBusy`), when no worker's
        stop is bound (a worker's stop is what ends its waits)."""
        self._closed.set()

    def check_hold(self) -> None:
        """Raise :class:`FleetHeld` while the fleet is held; it asks to be tried again
        within ``HOLD_RECHECK_S``, so a release is acted on soon."""
        self._raise_if_held(self.held_for())

    def check_remembered(self) -> None:
        """Raise as :meth:`check_hold` does for a hold this worker already knows, with no
        read of Redis: the last look before a call is sent, for a call that waited for a
        connection while another call of this worker was refused."""
        with self._lock:
            left = max(0.0, self._held_until - self._clock())
        self._raise_if_held(left)

    def _raise_if_held(self, left: float) -> None:
        if left > 0:
            with self._lock:
                cause, reason = self._cause, self._reason
            shown = None if math.isinf(left) else round(left, 3)
            if cause == EXHAUSTED:  # the stored reason names the exhaustion's own cause
                raise FleetExhausted(min(left, HOLD_RECHECK_S), reason, cause, shown)
            why = held_message(self.analyzer_id, left, cause)
            raise FleetHeld(min(left, HOLD_RECHECK_S), why, cause, shown)

    def reserve(self, stop: threading.Event | None = None) -> None:
        """Take the next rate-limit slot and wait for it, then return: the call may go.
        A slot further than :func:`wait_bound` is not taken (:class:`FleetBusy` with the
        wait); a wait that ``stop`` (default: the worker's, :meth:`bind_stop`) interrupts
        is :class:`FleetBusy` too (the call was not made). Without a rate limit, returns
        at once. The wait is reported with ``waited_for_turn`` *before* it starts: the
        hang watchdog and the latency sample leave it out, since it is the fleet's
        pacing, not a call in progress."""
        stop = self._stop if stop is None else stop
        wait = self._reserve()
        if wait <= 0:
            return
        waited_for_turn(wait)
        if stop.wait(wait):
            raise FleetBusy(
                None, f"analyzer {self.analyzer_id}: stopping before a rate-limited call"
            )

    def held_for(self) -> float:
        """Seconds before the fleet may call the analyzer again (0: now; ``inf``: until
        an operator releases the hold). A thread that finds a read of the key due takes
        it; the ones arriving meanwhile wait for its answer instead of calling."""
        with self._lock:
            left, read = hold_view(self._clock(), self._held_until, self._next_read)
        if not read or self._client is None:
            return left
        if not self._read_lock.acquire(timeout=HOLD_READ_WAIT_S):
            return max(left, HOLD_RECHECK_S)  # the read is stuck: call nobody meanwhile
        try:
            with self._lock:
                now = self._clock()
                left, read = hold_view(now, self._held_until, self._next_read)
                started = self._holds_set
            if not read:  # another thread read it while this one waited
                return left
            self._read_hold(now, started)
            with self._lock:
                self._next_read = self._clock() + self.refresh_s
                return max(0.0, self._held_until - self._clock())
        finally:
            self._read_lock.release()

    def hold(self, seconds: float | None, reason: str, *, cause: str = holds.RETRY_AFTER) -> None:
        """Hold this worker, and through Redis the fleet, for ``seconds`` (never
        shortening a longer hold); ``None``: until an operator releases it. ``cause`` is
        a short word (``retry_after``, ``exhausted``) and ``reason`` a sentence, both
        stored with the hold for operators; neither may hold a secret."""
        if seconds is not None and seconds <= 0:
            return
        with self._lock:
            until = math.inf if seconds is None else self._clock() + seconds
            if until > self._held_until:
                self._held_until, self._cause, self._reason = until, cause, reason
            self._holds_set += 1
        if self._client is None:
            return
        millis = 0 if seconds is None else max(1, math.ceil(seconds * 1000))
        record = holds.encode_hold(self.analyzer_id, self.analyzer, cause, reason, seconds)
        try:
            HOLD_SCRIPT.run(self._client, [self.hold_key], [millis, record])
        except redis.RedisError as exc:
            self._redis_failed("analyzer_hold_not_shared", exc)

    def _read_hold(self, now: float, started: int) -> None:
        """Replace the remembered hold by the key's (a release ends it), unless this
        worker set a hold since the read began; on a Redis error keep what it knew."""
        assert self._client is not None
        try:
            found = holds.read_hold(self._client, self.analyzer_id)
        except redis.RedisError as exc:
            self._redis_failed("analyzer_hold_unknown", exc)
            return
        self._redis_back()
        if found is None:
            until = 0.0
        elif found.seconds_left is None:
            until = math.inf
        else:
            until = now + found.seconds_left
        with self._lock:
            if self._holds_set != started:
                until = max(until, self._held_until)
            self._held_until = until
            if found is not None:
                self._cause, self._reason = found.cause, found.reason

    def _reserve(self) -> float:
        """Seconds to wait for a reserved rate slot (0 without a rate limit)."""
        if self.rate_limit is None:
            return 0.0
        if self._client is None:
            if not self._unbound_warned:
                self._unbound_warned = True
                log.warning(
                    "analyzer_rate_limit_unbound",
                    extra={"analyzer_id": self.analyzer_id, "rate_limit": self.rate_limit},
                )
            return 0.0
        interval_us = 1_000_000 / self.rate_limit
        bound_us = wait_bound(self.rate_limit) * 1_000_000
        try:
            reserved, wait_us = GCRA_SCRIPT.run(
                self._client, [self.rate_key], [f"{interval_us:.0f}", f"{bound_us:.0f}"]
            )
        except redis.RedisError as exc:
            self._redis_failed("analyzer_rate_limit_unknown", exc)
            why = f"analyzer {self.analyzer_id}: rate limiter unreachable"
            raise FleetBusy(None, why) from None
        self._redis_back()
        wait_s = int(wait_us) / 1_000_000
        if not int(reserved):
            raise FleetBusy(
                wait_s, f"analyzer {self.analyzer_id}: rate limit, next slot in {wait_s:.2f}s"
            )
        return wait_s

    def _redis_failed(self, event: str, exc: BaseException) -> None:
        with self._lock:
            first, self._redis_ok = self._redis_ok, False
        if first:  # once per outage, not once per call
            error = scrub(f"{type(exc).__name__}: {exc}")
            log.warning(event, extra={"analyzer_id": self.analyzer_id, "error": error})

    def _redis_back(self) -> None:
        if not self._redis_ok:
            with self._lock:
                self._redis_ok = True
            log.info("analyzer_limits_redis_back", extra={"analyzer_id": self.analyzer_id})
