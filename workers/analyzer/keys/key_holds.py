"""The holds of rejected keys, one per key, as every worker of a fleet shares them.

A provider that rejects a key (401, 403) will reject it again, but only that key: during
a rotation, workers already on the new key must keep calling. So a rejected key's hold is
the key's own (:func:`~sentinel_platform.streams.operators.analyzer_holds.key_hold_key`,
named by the key's digest, its record naming the key's fingerprint), not the analyzer's:
it holds every worker calling with that key and no other. It has no end of its own (the
key stays revoked): a worker is held by it until the worker reads another key (its key
file changed, see :class:`~workers.analyzer.keys.key_source.KeySource`), every worker until an
operator releases it (``sentinel analyzer release``).

Like the analyzer's hold (:class:`~workers.analyzer.limits.fleet_limits.FleetLimits`), a key's
hold is remembered in the worker and its key in Redis re-read at most every
``KEY_HOLD_REFRESH_S`` by one thread at a time (the others wait for that read, bounded by
``HOLD_READ_WAIT_S``), so a release reaches every worker within that; a read that finds
the key gone ends the remembered hold. Slower than the analyzer's refresh: a worker that
misses another's hold of its key makes one refused call of its own and holds the key at
once: one call is lost at most, for one read a second instead of ten. Every command
touches one key, so it runs on a Redis Cluster. A Redis error fails open, as the
analyzer's hold does: the provider will say 401 again.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import redis

from sentinel_platform.redaction import redact_url, scrub
from sentinel_platform.streams.operators import analyzer_holds as holds
from sentinel_platform.streams.plumbing.connection import RedisClient
from workers.analyzer.limits.fleet_limits import EXHAUSTED, HOLD_READ_WAIT_S
from workers.analyzer.limits.fleet_scripts import HOLD_SCRIPT

log = logging.getLogger(__name__)

#: How stale a worker's view of its key's hold may be (a release, another worker's hold).
KEY_HOLD_REFRESH_S = 1.0


@dataclass
class Remembered:
    """What a worker knows of one key's hold: its reason ("" none) and when to re-read."""

    reason: str = ""
    next_read: float = 0.0
    sets: int = 0  # bumped by a hold this worker sets: a read begun before keeps it


class KeyHolds:
    """The rejected-key holds of one analyzer, for all the threads of one worker.

    :meth:`held` before a call (Redis at most every ``refresh_s`` per key),
    :meth:`remembered` just before it is sent (no Redis), :meth:`hold` after a rejection.
    Keys are named by their digest and shown by their fingerprint; neither reveals the key.
    """

    def __init__(
        self,
        analyzer_id: str,
        analyzer_url: str = "",
        client: RedisClient | None = None,
        *,
        refresh_s: float = KEY_HOLD_REFRESH_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.analyzer_id = analyzer_id
        self.analyzer = redact_url(analyzer_url) if analyzer_url else ""
        self.refresh_s = refresh_s
        self._client = client
        self._clock = clock
        self._lock = threading.Lock()
        self._read_lock = threading.Lock()  # one reader of a key's hold at a time
        self._known: dict[str, Remembered] = {}
        self._warned = False

    def bind(self, client: RedisClient) -> None:
        """Share the holds through ``client`` from now on (once, at start-up)."""
        self._client = client

    def remembered(self, digest: str) -> str:
        """The reason this worker remembers the key ``digest`` is held for ("": not held)."""
        with self._lock:
            known = self._known.get(digest)
            return known.reason if known else ""

    def held(self, digest: str) -> str:
        """The reason the key ``digest`` is held for ("": not held), the shared key re-read
        when its refresh is due; the threads arriving meanwhile wait for that read."""
        if not digest:
            return ""
        with self._lock:
            known = self._known.setdefault(digest, Remembered())
            due = self._client is not None and self._clock() >= known.next_read
        if not due:
            return self.remembered(digest)
        if not self._read_lock.acquire(timeout=HOLD_READ_WAIT_S):
            return self.remembered(digest)  # the read is stuck: what is known stands
        try:
            with self._lock:
                if self._clock() < known.next_read:  # read by another thread meanwhile
                    return known.reason
                started = known.sets
            reason = self._read(digest)
            with self._lock:
                known.next_read = self._clock() + self.refresh_s
                if reason is not None and (reason or known.sets == started):
                    known.reason = reason
                return known.reason
        finally:
            self._read_lock.release()

    def hold(self, digest: str, fingerprint: str, reason: str) -> None:
        """Hold the key ``digest`` in this worker and, through Redis, the fleet, until an
        operator releases it; ``reason`` and ``fingerprint`` are stored for operators and
        may hold no secret."""
        with self._lock:
            known = self._known.setdefault(digest, Remembered())
            known.reason = reason
            known.sets += 1
        log.warning(  # the ERROR line is the worker's analyzer_exhausted
            "analyzer_key_held",
            extra={"analyzer_id": self.analyzer_id, "key": fingerprint, "reason": reason},
        )
        if self._client is None:
            return
        record = holds.encode_hold(
            self.analyzer_id, self.analyzer, EXHAUSTED, reason, None, key=fingerprint
        )
        try:
            holds.register_key(self._client, self.analyzer_id, digest, fingerprint)
            key = holds.key_hold_key(self.analyzer_id, digest)
            HOLD_SCRIPT.run(self._client, [key], [0, record])
        except redis.RedisError as exc:
            self._failed("analyzer_key_hold_not_shared", exc)

    def _read(self, digest: str) -> str | None:
        """The stored reason of the key's hold, "" when there is none, None when Redis
        could not be read."""
        assert self._client is not None
        try:
            found = holds.read_key_hold(self._client, self.analyzer_id, digest)
        except redis.RedisError as exc:
            self._failed("analyzer_key_hold_unknown", exc)
            return None
        return "" if found is None else found.reason or "rejected_key"

    def _failed(self, event: str, exc: BaseException) -> None:
        if not self._warned:  # once per worker: the analyzer's own hold logs the outage
            self._warned = True
            error = scrub(f"{type(exc).__name__}: {exc}")
            log.warning(event, extra={"analyzer_id": self.analyzer_id, "error": error})
