"""Limits every worker of a fleet shares for one downstream service (the analyzer).

A hosted model API has one capacity for all its callers. Two limits follow from it, both
kept in Redis so that every worker process sees them at once:

* **The hold.** When the service answers ``Retry-After: S`` to any worker, no worker
  calls it for ``S`` seconds: one key with a TTL of ``S`` (``PX``), set only if the new
  hold ends later than the one already there (a server-side script: compare ``PTTL`` and
  ``SET`` in one step). Before each call a client checks it cheaply: a hold it knows of
  is answered from memory, and the key is re-read at most every ``HOLD_REFRESH_S`` by one
  thread at a time, so a worker asks Redis about ten times a second, not once per call.
  Remaining time comes from ``PTTL``, so workers' clocks never need to agree. A hold
  set because the service said it is *exhausted* (a quota spent, a key rejected) is
  marked so in the key's value, and every worker reading it raises
  :class:`FleetExhausted` rather than :class:`FleetHeld`.
* **The rate limit** (optional, calls per second across the fleet): GCRA, the generic
  cell rate algorithm, in one server-side script on one key holding the theoretical
  arrival time (TAT) of the next call in the server's clock (as the key's expiry time,
  so an idle limiter leaves no key behind and needs no ``TIME``). Each call
  *reserves* the next free slot and gets back how long to wait for it, so callers are
  served in the order they reached Redis, whichever worker they are on (fair by
  construction, no retry storm, one round trip per call). A slot further away than
  :func:`wait_bound` is not reserved: the caller raises :class:`Busy` with the wait, and
  the message waits in the consumer loop instead of holding a thread.

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

import hashlib
import logging
import math
import threading
import time
from collections.abc import Callable
from urllib.parse import urlsplit

import redis

from sentinel_platform.redaction import scrub
from sentinel_platform.streams.consumer.processor import Busy, waited_for_turn
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.scripts import LuaScript

log = logging.getLogger(__name__)

KEY_PREFIX = "sentinel:analyzer:"
#: How stale a worker's view of the fleet's hold may be: a hold another worker sets
#: reaches this one within this long (a few calls' worth at most).
HOLD_REFRESH_S = 0.1
#: A rate-limit slot this close is waited for on the calling thread; a later one is
#: handed back as ``Busy``. Long enough that a fleet running at its rate limit with
#: hundreds of calls queued still reserves in order (fairness), short against the
#: shutdown timeout and the hang watchdog, so a stop is never held up by a sleeping call.
RATE_WAIT_BOUND_S = 1.0
DEFAULT_PORTS = {"http": 80, "https": 443}
#: The highest rate limit: the limiter's first slot is a key with a TTL of one interval,
#: and a TTL is whole milliseconds.
MAX_RATE_PER_S = 1000.0

#: KEYS[1] the hold; ARGV[1] its length in ms, ARGV[2] the reason. Never shortens a hold.
HOLD_SCRIPT = LuaScript(
    "analyzer_hold",
    """
local want = tonumber(ARGV[1])
local left = redis.call('PTTL', KEYS[1])
if left >= want then
  return left
end
redis.call('SET', KEYS[1], ARGV[2], 'PX', want)
return want
""",
)

#: KEYS[1] the TAT, kept as the key's expiry time (ms, the server's clock) with the
#: sub-millisecond rest as its value (us); ARGV[1] the emission interval and ARGV[2] the
#: longest acceptable wait, both in us. Returns {reserved, wait in us}. The server's
#: clock is read through PTTL and PEXPIRETIME rather than TIME, which the least-privilege
#: ACL of the platform's Redis user does not grant; a missing key is an idle limiter.
GCRA_SCRIPT = LuaScript(
    "analyzer_gcra",
    """
local interval = tonumber(ARGV[1])
local max_wait = tonumber(ARGV[2])
local left = redis.call('PTTL', KEYS[1])
if left < 0 then
  local ms = math.floor(interval / 1000)
  redis.call('SET', KEYS[1], interval - ms * 1000, 'PX', ms)
  return {1, 0}
end
local rest = tonumber(redis.call('GET', KEYS[1])) or 0
local wait = left * 1000 + rest
if wait > max_wait then
  return {0, wait}
end
local tat = redis.call('PEXPIRETIME', KEYS[1]) * 1000 + rest + interval
local at = math.floor(tat / 1000)
redis.call('SET', KEYS[1], tat - at * 1000, 'PXAT', at)
return {1, wait}
""",
)


class FleetBusy(Busy):
    """Not sent: the fleet is held, or its rate limit has no slot for this call yet."""

    sent = False


class FleetHeld(FleetBusy):
    """Not sent: the analyzer refused a call of the fleet (this worker's or another's) and
    its ``Retry-After`` holds every worker; the consumer's limit stops growing."""

    shared_refusal = True


class FleetExhausted(FleetHeld):
    """Not sent: the analyzer told a worker of the fleet that it is exhausted (a quota
    spent, a key rejected), so every worker stops calling it; ``reason`` starts with the
    exhaustion's cause (``rejected_key: ...``). What the message gets follows
    ``SENTINEL_ANALYZER_WHEN_DOWN``, decided by the client."""


def stored_hold(cause: str, reason: str) -> str:
    """The hold key's value: the reason, prefixed ``exhausted|`` for an exhaustion, so
    every worker reading the hold knows which it is (a ``Retry-After`` keeps the bare
    reason, as before)."""
    return reason if cause == "retry_after" else f"{cause}|{reason}"


def read_stored_hold(value: str | bytes | None) -> tuple[str, str]:
    """``(cause, reason)`` of a hold key's value (:func:`stored_hold`)."""
    text = value.decode(errors="replace") if isinstance(value, bytes) else value or ""
    cause, sep, reason = text.partition("|")
    return (cause, reason) if sep and cause == "exhausted" else ("retry_after", text)


def analyzer_key_id(url: str, explicit: str | None = None) -> str:
    """The name a fleet's workers share for one analyzer: ``explicit``
    (``SENTINEL_ANALYZER_ID``) if given, else the first 16 hex digits of a SHA-256 of
    ``scheme://host:port/path``. User-info, query and fragment are left out (they may
    carry credentials), the host is lower-cased and a default port is written out, so
    every spelling of one endpoint gives one id and no id reveals a secret."""
    if explicit:
        return explicit
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    port = parts.port or DEFAULT_PORTS.get(scheme, 0)
    identity = f"{scheme}://{(parts.hostname or '').lower()}:{port}{parts.path or '/'}"
    return hashlib.sha256(identity.encode()).hexdigest()[:16]


def wait_bound(rate_limit: float) -> float:
    """The longest wait for a rate-limit slot taken on the calling thread: at least
    ``RATE_WAIT_BOUND_S``, and at least one and a half intervals, so that even a rate
    below one call a second lets a caller reserve the next slot."""
    return max(RATE_WAIT_BOUND_S, 1.5 / rate_limit)


def hold_view(
    now: float, held_until: float, next_read: float, *, recheck: bool = False
) -> tuple[float, bool]:
    """What a client knows of the hold at ``now``: the seconds left of the hold it
    remembers (``held_until``), and whether it must re-read the shared key (the last
    read is older than the refresh interval, and no hold is remembered or the one
    remembered must be ``recheck``-ed: an exhaustion, which an operator may release at
    any time and which must then end on every worker, not hours later)."""
    left = max(0.0, held_until - now)
    return left, (left == 0.0 or recheck) and now >= next_read


class FleetLimits:
    """The hold and the rate limit of one analyzer, for all the threads of one worker.

    :meth:`check_hold` and :meth:`reserve` are called before every call; :meth:`hold`
    after an answer asking for quiet. Thread-safe; Redis is asked at most once per
    ``refresh_s`` for the hold (by one thread, the others use what it last read) and once
    per call for a rate slot.
    """

    def __init__(
        self,
        analyzer_id: str,
        rate_limit: float | None = None,
        client: RedisClient | None = None,
        *,
        refresh_s: float = HOLD_REFRESH_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if rate_limit is not None and not 0 < rate_limit <= MAX_RATE_PER_S:
            raise ValueError(f"rate limit must be above 0 and at most 1000/s, got {rate_limit}")
        self.analyzer_id = analyzer_id
        self.rate_limit = rate_limit
        self.hold_key = f"{KEY_PREFIX}{analyzer_id}:hold"
        self.rate_key = f"{KEY_PREFIX}{analyzer_id}:rate"
        self.refresh_s = refresh_s
        self._client = client
        self._clock = clock
        self._lock = threading.Lock()
        self._held_until = 0.0
        self._held_cause, self._held_reason = "retry_after", ""
        self._next_read = 0.0
        self._redis_ok = True
        self._unbound_warned = False

    def bind(self, client: RedisClient) -> None:
        """Share the limits through ``client`` from now on (once, at start-up)."""
        self._client = client

    def check_hold(self) -> None:
        """Raise :class:`FleetHeld` with the time left while the fleet is held."""
        left = self.held_for()
        if left > 0:
            with self._lock:
                cause, reason = self._held_cause, self._held_reason
            if cause == "exhausted":
                raise FleetExhausted(left, reason)
            why = f"analyzer {self.analyzer_id} held for {left:.2f}s (Retry-After)"
            raise FleetHeld(left, why)

    def reserve(self, stop: threading.Event) -> None:
        """Take the next rate-limit slot and wait for it, then return: the call may go.
        A slot further than :func:`wait_bound` is not taken (:class:`FleetBusy` with the
        wait); a wait that ``stop`` interrupts is :class:`FleetBusy` too (the call was
        not made). Without a rate limit, returns at once."""
        wait = self._reserve()
        if wait <= 0:
            return
        waited_for_turn(wait)  # not the analyzer's latency: the limit must not cut for it
        if stop.wait(wait):
            raise FleetBusy(
                None, f"analyzer {self.analyzer_id}: stopping before a rate-limited call"
            )

    def held_for(self) -> float:
        """Seconds before the fleet may call the analyzer again (0: now)."""
        with self._lock:
            now = self._clock()
            exhausted = self._held_cause == "exhausted"
            left, read = hold_view(now, self._held_until, self._next_read, recheck=exhausted)
            if not read or self._client is None:
                return left
            self._next_read = now + self.refresh_s  # this thread reads; the others go on
        remaining_ms, value = self._read_hold()
        if remaining_ms is None:  # Redis unreadable: what this worker knows stands
            return left
        if remaining_ms <= 0:
            with self._lock:
                if exhausted and left > 0:  # released (or ended) for the whole fleet
                    self._held_until, self._held_cause = 0.0, "retry_after"
            return 0.0
        with self._lock:
            if now + remaining_ms / 1000 >= self._held_until:
                self._held_cause, self._held_reason = read_stored_hold(value)
            self._held_until = max(self._held_until, now + remaining_ms / 1000)
            return max(0.0, self._held_until - self._clock())

    def hold(self, seconds: float, reason: str, *, cause: str = "retry_after") -> None:
        """Hold this worker, and through Redis the fleet, for ``seconds`` (never
        shortening a longer hold). ``reason`` is stored with it; it must hold no secret.
        ``cause`` is ``retry_after`` or ``exhausted`` (every worker then raises
        :class:`FleetExhausted` instead of :class:`FleetHeld` while it lasts)."""
        if seconds <= 0:
            return
        with self._lock:
            until = self._clock() + seconds
            if until >= self._held_until:
                self._held_cause, self._held_reason = cause, reason
            self._held_until = max(self._held_until, until)
        if self._client is None:
            return
        millis = max(1, math.ceil(seconds * 1000))
        try:
            HOLD_SCRIPT.run(self._client, [self.hold_key], [millis, stored_hold(cause, reason)])
        except redis.RedisError as exc:
            self._redis_failed("analyzer_hold_not_shared", exc)

    def _read_hold(self) -> tuple[int | None, str | bytes | None]:
        """The hold's milliseconds left and its stored value, in one round trip (None
        left when Redis could not be read)."""
        assert self._client is not None
        try:
            pipe = self._client.pipeline(transaction=False)
            pipe.pttl(self.hold_key)
            pipe.get(self.hold_key)
            remaining, value = pipe.execute()
        except redis.RedisError as exc:
            self._redis_failed("analyzer_hold_unknown", exc)
            return None, None
        self._redis_back()
        return int(remaining), value

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
