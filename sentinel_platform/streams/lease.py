"""Liveness leases: how the pool tells a dead consumer from a slow one.

Idle time alone cannot tell them apart (the original stole in-progress messages from
slow workers after 30 s). Each worker therefore holds ``keys.lease(consumer)``, a key
with a ``SENTINEL_LEASE_TTL_MS`` TTL that a heartbeat *thread* refreshes every third of
the TTL, independently of the message being processed. A live worker's messages are
never claimed, however long they take; a killed worker's lease expires within one TTL
and its messages become claimable.

Workers also register in the hash ``keys.consumers`` (pid, host, start time) so the
pool can tell a registered worker whose lease is gone (claimable after one lease TTL of
idleness) from a consumer that never spoke the lease protocol, such as a legacy
Sentinel-L7 worker (claimable after ``SENTINEL_RECLAIM_IDLE_MS``, the original rule).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone

from sentinel_platform.streams.connection import TRANSIENT_ERRORS, RedisClient
from sentinel_platform.streams.keys import StreamKeys

log = logging.getLogger(__name__)


class LeaseHeldError(RuntimeError):
    """Another live process holds the lease of this consumer name."""


class Lease:
    """The liveness lease and registry entry of one consumer."""

    def __init__(self, client: RedisClient, keys: StreamKeys, consumer: str, ttl_ms: int) -> None:
        self.client = client
        self.keys = keys
        self.consumer = consumer
        self.ttl_ms = ttl_ms
        self.key = keys.lease(consumer)
        self.value = f"{socket.gethostname()}:{os.getpid()}"
        self.registration = json.dumps(
            {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            }
        )

    def acquire(self, wait_s: float | None = None) -> None:
        """Take the lease and register, before the first read puts anything in our PEL.

        A lease held by another process means the consumer name is taken. A killed
        predecessor's lease runs out within one TTL, so we wait up to two TTLs before
        concluding that a live process uses the name (two processes sharing one name
        would retry each other's in-flight messages) and raising :class:`LeaseHeldError`.
        """
        deadline = time.monotonic() + (2 * self.ttl_ms / 1000 if wait_s is None else wait_s)
        while not self.client.set(self.key, self.value, px=self.ttl_ms, nx=True):
            holder = self.client.get(self.key)
            if holder == self.value:
                break
            if time.monotonic() > deadline:
                raise LeaseHeldError(
                    f"consumer name {self.consumer!r} of {self.keys.stream} is in use by "
                    f"{holder} (lease {self.key}); choose another --consumer"
                )
            time.sleep(self.ttl_ms / 4000)
        self.client.hset(self.keys.consumers, self.consumer, self.registration)

    def refresh(self) -> bool:
        """Extend the lease; False if it had expired (then it is taken again and re-registered)."""
        previous = self.client.set(self.key, self.value, px=self.ttl_ms, get=True)
        if previous is None:
            self.client.hset(self.keys.consumers, self.consumer, self.registration)
            return False
        return True

    def release(self) -> None:
        self.client.delete(self.key)

    def unregister(self) -> None:
        self.client.hdel(self.keys.consumers, self.consumer)


class Heartbeat(threading.Thread):
    """Refreshes the lease and runs ``on_beat`` (lag key, hang watchdog) on a fixed period.

    It is a thread, not a step of the loop, precisely so that a slow message does not
    stop the lease or the lag key from being refreshed.
    """

    def __init__(
        self,
        lease: Lease,
        interval_s: float,
        on_beat: Callable[[], None],
        log_fields: dict[str, str],
    ) -> None:
        super().__init__(name="heartbeat", daemon=True)
        self.lease = lease
        self.interval_s = interval_s
        self.on_beat = on_beat
        self.log_fields = log_fields
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.wait(self.interval_s):
            self.beat()

    def beat(self) -> None:
        started = time.monotonic()
        try:
            self.on_beat()  # first: the watchdog may decide the worker is hung
            if self._halt.is_set():
                return
            if not self.lease.refresh():
                log.warning("lease_lost", extra={**self.log_fields, "lease": self.lease.key})
        except TRANSIENT_ERRORS as exc:
            log.warning("heartbeat_failed", extra={**self.log_fields, "error": str(exc)})
        except Exception:  # the heartbeat must outlive any single bad beat
            log.exception("heartbeat_error", extra=self.log_fields)
        elapsed = time.monotonic() - started
        if elapsed > self.interval_s:
            log.warning("heartbeat_slow", extra={**self.log_fields, "elapsed_s": round(elapsed, 3)})

    def stop(self) -> None:
        self._halt.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout=5)


def heartbeat_interval_s(lease_ttl_ms: int, lag_key_ttl_s: int) -> float:
    """A third of the shorter of the lease TTL and the lag key TTL: two beats may be missed."""
    return min(lease_ttl_ms / 1000, lag_key_ttl_s) / 3
