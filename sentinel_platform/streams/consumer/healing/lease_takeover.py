"""A restarted worker takes its killed predecessor's lease at once, not one TTL later.

A worker restarted under its predecessor's name (``sentinel up`` gives each slot one)
meets the lease the killed process left behind, which lives on for up to
``SENTINEL_LEASE_TTL_MS``. The predecessor also registered its dedicated connection
beside that lease (``liveness.py``), and the kernel closed that connection when the
process died. So the waiting worker judges the holder the way survivors do
(:func:`~sentinel_platform.streams.consumer.healing.liveness.judge`: the current lease's
registration, its connection missing twice :data:`~liveness.CONFIRM_S` apart) and, once
the holder is dead by its connection, replaces the lease with its own in one
compare-and-set (:data:`TAKE_OVER`): only the lease value judged dead is replaced, so a
holder that re-registered or another process that took the name meanwhile is left alone.

What the connection cannot tell keeps the old rule, waiting for the lease to run out: no
registration (a predecessor without the link, ``SENTINEL_CONNECTION_LIVENESS=false``), a
registration made for another lease value or on another node, an ACL without
``CLIENT LIST`` (the check then stops asking). A hung predecessor keeps its connection,
so it is never taken over: its hang watchdog gives the name up.
"""

from __future__ import annotations

import time

import redis

from sentinel_platform.logs import BoundLogger
from sentinel_platform.streams.consumer.healing.liveness import (
    CONFIRM_S,
    Observation,
    Registration,
    Sighting,
    Verdict,
    judge,
    live_client_ids,
    node_of,
    registration_key,
)
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform.streams.plumbing.scripts import LuaScript

#: KEYS: lease, registration; ARGV: the dead holder's value, ours, ttl_ms. Replaces the
#: lease only while it is still the dead holder's, and drops its registration with it.
TAKE_OVER = LuaScript(
    "take_over_lease",
    """
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
redis.call('DEL', KEYS[2])
return 1
""",
)


class Predecessor:
    """The check a worker waiting for its name's lease makes on the holder's connection.

    Used from the thread that acquires the lease only; it keeps the sighting between two
    looks, as the survivors' watch does."""

    def __init__(self, client: RedisClient, keys: StreamKeys, consumer: str, log: BoundLogger):
        self.client = client
        self.lease_key = keys.lease(consumer)
        self.registration_key = registration_key(keys, consumer)
        self.log = log
        #: False once the server refused ``CLIENT LIST``: the lease TTL alone decides
        self.enabled = True
        self._sighting: Sighting | None = None

    @property
    def confirming(self) -> bool:
        """A missing connection was seen once: look again after :data:`CONFIRM_S`."""
        return self._sighting is not None

    def pause_s(self, pause_s: float) -> float:
        """The pause before the next look: shortened to confirm a missing connection."""
        return min(pause_s, CONFIRM_S) if self.confirming else pause_s

    def take_over(self, holder: str, value: str, ttl_ms: int) -> bool:
        """Replace ``holder``'s lease with ``value`` if its connection is confirmed gone."""
        if self.verdict(holder) != "dead":
            return False
        keys = [self.lease_key, self.registration_key]
        if not int(TAKE_OVER.run(self.client, keys, [holder, value, ttl_ms])):
            return False
        self._sighting = None
        self.log.info("lease_taken_over", extra={"lease": self.lease_key, "holder": holder})
        return True

    def verdict(self, holder: str) -> Verdict:
        """Dead, alive or unknown by the registered connection (one or two commands)."""
        if not self.enabled:
            return "unknown"
        raw = self.client.get(self.registration_key)
        registration = Registration.decode(None if raw is None else str(raw))
        live: frozenset[int] | None = None
        node = ""
        if registration is not None and registration.lease == holder:
            node = node_of(self.client, self.registration_key)
            live = self._live_ids(registration.client_id)
        seen = Observation(holder, registration, live, node)
        verdict, self._sighting = judge(seen, self._sighting, time.monotonic())
        return verdict

    def _live_ids(self, client_id: int) -> frozenset[int] | None:
        try:
            return live_client_ids(self.client, self.registration_key, [client_id])
        except redis.ResponseError as exc:  # NoPermissionError included
            self.enabled = False
            self.log.warning(
                "liveness_probe_unavailable",
                extra={"error": str(exc), "fallback": "the lease TTL (a restart waits for it)"},
            )
            return None
