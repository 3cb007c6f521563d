"""After an outage, wait before recovering other consumers' messages.

A Redis restored from AOF/RDB after an outage longer than one lease TTL comes back with
every lease already expired. The first worker to reconnect would see every other worker
as dead and claim their in-flight messages before their heartbeats return: effects are
deduplicated, but the work is done twice and the processor attempts are counted. So a
worker that has seen Redis fail (its loop or its heartbeat) recovers only its own
failed messages until ``grace_s`` (one lease TTL, i.e. three heartbeat intervals) has
passed since it reached Redis again: live workers re-take their leases within one
heartbeat interval, so only the really dead ones are left without a lease.

The decision is a pure function of times; :class:`RecoveryGrace` only keeps the state,
and may be told about an outage from any thread.
"""

from __future__ import annotations

import threading


def others_claimable(
    now: float, outage_seen: bool, resumed_at: float | None, grace_s: float
) -> bool:
    """Whether other consumers' messages may be recovered at ``now`` (monotonic seconds).

    ``outage_seen``: Redis failed since we last reached it; ``resumed_at``: when we last
    reached Redis again after an outage (None if never).
    """
    if outage_seen:
        return False
    return resumed_at is None or now - resumed_at >= grace_s


class RecoveryGrace:
    """The grace state of one worker: outage seen, and when Redis answered again."""

    def __init__(self, grace_s: float) -> None:
        self.grace_s = grace_s
        self._outage_seen = False
        self._resumed_at: float | None = None
        self._lock = threading.Lock()

    def outage(self) -> None:
        """Redis failed (any thread): hold off until it answers and the grace has passed."""
        with self._lock:
            self._outage_seen = True

    def reached(self, now: float) -> None:
        """Redis answered a request of the recovery step at ``now``."""
        with self._lock:
            if self._outage_seen:
                self._outage_seen = False
                self._resumed_at = now

    def allows_others(self, now: float) -> bool:
        with self._lock:
            return others_claimable(now, self._outage_seen, self._resumed_at, self.grace_s)
