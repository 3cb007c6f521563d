"""Liveness leases: how the fleet tells a dead consumer from a slow one.

Idle time alone cannot tell them apart: a message being processed slowly is as idle as
one held by a dead process. Each worker therefore holds ``keys.lease(consumer)``, a key
with a ``SENTINEL_LEASE_TTL_MS`` TTL that a heartbeat *thread* refreshes every third of
the TTL, independently of the message being processed and of every other write: the lag
key is written beside it, by a thread of its own (:class:`SideWrites`), so a lag write
that fails or is slow never lets the lease lapse. A live worker's messages are never
claimed, however long they take; a killed worker's lease expires within one TTL and its
messages become claimable.

A lease outlives a SIGKILL by up to one TTL, so the lease holder also keeps a dedicated
connection registered beside it (``liveness.py``): the kernel closes a killed process's
socket at once, and survivors that see the registered connection gone claim at once; a
worker restarted under the dead holder's name takes its lease over at once
(``lease_takeover.py``).
The lease TTL stays the rule for vanished hosts and for holders without a registration.

Workers also register in the hash ``keys.consumers`` (pid, host, start time) so the
fleet can tell a registered worker whose lease is gone (claimable after one lease TTL of
idleness) from a consumer that never spoke the lease protocol, such as a legacy
Sentinel-L7 worker (claimable after ``SENTINEL_RECLAIM_IDLE_MS`` of idleness: nothing
better is known about it).

**One identity per process.** The lease value is ``host:pid:token`` with a random token,
so two processes never mistake each other's lease for their own, even when they share a
hostname and a pid (containers with a fixed hostname are all pid 1). A second process
started with a name in use waits up to two TTLs (a killed predecessor's lease runs out,
unless its registered connection shows it dead at once)
and then refuses to start (:class:`LeaseHeldError`, exit status 2); that wait looks at the
lease at least every :data:`LEASE_POLL_MAX_S` and ends at once when the worker is asked to
stop (:class:`LeaseWaitStopped`: nothing taken, exit status 0). A process whose lease
was taken while it stalled (its lease expired, another process took the name) stops at
its next heartbeat instead of overwriting it, and claims nothing meanwhile (the claim
script checks the lease). Every write to the lease is a compare-and-set on the token,
and leaving the group (:meth:`Lease.leave`) deletes the consumer only in the same atomic
step that checks its PEL is empty and the name is not held by another process.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import socket
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import Literal

import redis

from sentinel_platform.logs import BoundLogger
from sentinel_platform.streams.consumer.healing.heartbeat_writes import (
    SideWriteFailures,
    SideWrites,
)
from sentinel_platform.streams.consumer.healing.lease_takeover import Predecessor
from sentinel_platform.streams.consumer.healing.link import Link
from sentinel_platform.streams.plumbing.connection import (
    FAILOVER_ERRORS,
    TRANSIENT_ERRORS,
    RedisClient,
)
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform.streams.plumbing.scripts import LuaScript

log = logging.getLogger(__name__)

#: Longest pause between two looks at a lease another process holds: a name its holder
#: gives back is taken within this, whatever the TTL (a quarter of it is the usual pause).
LEASE_POLL_MAX_S = 1.0

RefreshResult = Literal["held", "retaken", "taken"]
LeaveResult = Literal["left", "holds_messages", "name_taken"]

#: Extend the lease if it is ours, take it again if it expired, never overwrite another's.
#: A lease taken again drops the connection registered under it: that connection may have
#: died while we stalled (the link registers the live one).
REFRESH = LuaScript(
    "refresh_lease",
    """
local holder = redis.call('GET', KEYS[1])
if holder and holder ~= ARGV[1] then return -1 end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
if holder then return 1 end
redis.call('HSET', KEYS[2], ARGV[3], ARGV[4])
redis.call('DEL', KEYS[3])
return 0
""",
)

#: Delete the lease only if it is ours.
RELEASE = LuaScript(
    "release_lease",
    """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
""",
)

#: Release our lease and leave the group in one step: DELCONSUMER drops the consumer's
#: pending entries, so it runs only if there are none and no other process holds the name.
LEAVE = LuaScript(
    "leave_group",
    """
local stream, lease, consumers, connection = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local group, consumer, value = ARGV[1], ARGV[2], ARGV[3]
local holder = redis.call('GET', lease)
if holder and holder ~= value then return -1 end
if holder then redis.call('DEL', lease, connection) end
if #redis.call('XPENDING', stream, group, '-', '+', 1, consumer) > 0 then return 0 end
redis.call('XGROUP', 'DELCONSUMER', stream, group, consumer)
redis.call('HDEL', consumers, consumer)
return 1
""",
)

_REFRESHED: dict[int, RefreshResult] = {1: "held", 0: "retaken", -1: "taken"}
_LEFT: dict[int, LeaveResult] = {1: "left", 0: "holds_messages", -1: "name_taken"}


class LeaseHeldError(RuntimeError):
    """Another live process holds the lease of this consumer name."""


class LeaseWaitStopped(RuntimeError):
    """Asked to stop while waiting for the lease of this consumer name: nothing was taken
    (no lease, no registration), so the worker stops as a stopped one does (exit status 0)."""


class Lease:
    """The liveness lease and registry entry of one consumer."""

    def __init__(
        self,
        client: RedisClient,
        keys: StreamKeys,
        consumer: str,
        ttl_ms: int,
        with_link: bool = True,
        stop: threading.Event | None = None,
    ) -> None:
        self.client = client
        self.keys = keys
        self.consumer = consumer
        self.ttl_ms = ttl_ms
        self.key = keys.lease(consumer)
        self.token = secrets.token_hex(8)
        self.value = f"{socket.gethostname()}:{os.getpid()}:{self.token}"
        self.registration = json.dumps(
            {
                "pid": os.getpid(),
                "host": socket.gethostname(),
                "token": self.token,
                "started": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            }
        )
        #: the dedicated connection survivors check (``liveness.py``)
        self.with_link = with_link
        self.log = BoundLogger(
            log, {"stream": keys.stream, "group": keys.group, "consumer": consumer}
        )
        self.link = Link(client, keys, consumer, self.value, self.log.fields)
        self._link_started = False
        #: cuts :meth:`acquire`'s wait short when set (the worker's stop event)
        self.stop = stop if stop is not None else threading.Event()
        #: judges a held lease by its holder's registered connection (``lease_takeover.py``)
        self.predecessor = Predecessor(client, keys, consumer, self.log) if with_link else None

    def acquire(self, wait_s: float | None = None) -> None:
        """Take the lease and register, before the first read puts anything in our PEL.

        A lease held by another process means the consumer name is taken. A killed
        predecessor whose registered connection is gone is taken over at once
        (:class:`~sentinel_platform.streams.consumer.healing.lease_takeover.Predecessor`); any
        other dead holder's lease runs out within one TTL, so we wait up to two TTLs (or
        ``wait_s``) before concluding that a live process uses the name (two processes
        sharing one name would retry each other's in-flight messages) and raising
        :class:`LeaseHeldError`. The wait is logged once (``lease_waiting``), looks again
        every quarter TTL, at most :data:`LEASE_POLL_MAX_S` apart, and ends with
        :class:`LeaseWaitStopped` as soon as :attr:`stop` is set: a worker restarted under
        its predecessor's name stays stoppable while that lease runs out.
        """
        bound_s = 2 * self.ttl_ms / 1000 if wait_s is None else wait_s
        deadline = time.monotonic() + bound_s
        waiting = False
        while not self.client.set(self.key, self.value, px=self.ttl_ms, nx=True):
            holder = self.client.get(self.key)
            if holder == self.value:
                break
            if holder is None:  # it ran out between the two commands: take it now
                continue
            if self._taken_over(holder):
                break
            if time.monotonic() > deadline:
                raise LeaseHeldError(
                    f"consumer name {self.consumer!r} of {self.keys.stream} is in use by "
                    f"{holder!s} (lease {self.key}); choose another --consumer"
                )
            if not waiting:
                waiting = True
                self._log_wait(holder, bound_s)
            if self.stop.wait(self._pause_s(deadline)):
                raise LeaseWaitStopped(
                    f"stopped while waiting for the lease {self.key} held by {holder!s}"
                )
        self.client.hset(self.keys.consumers, self.consumer, self.registration)
        self.start_link()

    def _taken_over(self, holder: object) -> bool:
        """The holder is dead by its registered connection, and its lease is ours now."""
        check = self.predecessor
        return check is not None and check.take_over(str(holder), self.value, self.ttl_ms)

    def _pause_s(self, deadline: float) -> float:
        """Until the next look at a held lease: a quarter TTL, capped, never past the bound
        (plus a hair, so the look after it finds the bound passed)."""
        until_bound = max(deadline - time.monotonic(), 0.0) + 0.01
        pause_s = min(self.ttl_ms / 4000, LEASE_POLL_MAX_S, until_bound)
        return self.predecessor.pause_s(pause_s) if self.predecessor else pause_s

    def _log_wait(self, holder: object, bound_s: float) -> None:
        self.log.info(
            "lease_waiting",
            extra={
                "lease": self.key,
                "holder": str(holder),
                "wait_s": round(bound_s, 3),
            },
        )

    def refresh(self) -> RefreshResult:
        """Extend the lease: ``held``; ``retaken`` if it had expired (taken again and
        re-registered); ``taken`` if another process holds it now (left untouched)."""
        keys = [self.key, self.keys.consumers, self.link.key]
        args = [self.value, self.ttl_ms, self.consumer, self.registration]
        return _REFRESHED[int(REFRESH.run(self.client, keys, args))]

    def release(self, client: RedisClient | None = None) -> None:
        """Delete the lease if it is still ours (the registered connection then no longer
        counts: survivors go by the lease). ``client``: the stop path's bounded client
        (``deadline.py``); by default the lease's own."""
        self.stop_link()
        RELEASE.run(client or self.client, [self.key], [self.value])

    def start_link(self) -> None:
        """Register our dedicated connection beside the lease (once per process)."""
        if self.with_link and not self.link.is_alive() and not self._link_started:
            self._link_started = True
            self.link.start()

    def stop_link(self) -> None:
        self.link.stop()

    def leave(self, client: RedisClient | None = None) -> LeaveResult:
        """Release the lease and, if we hold no pending entry, leave the group and the
        registry, all in one atomic step. ``client`` as for :meth:`release`."""
        self.stop_link()
        keys = [self.keys.stream, self.key, self.keys.consumers, self.link.key]
        args = [self.keys.group, self.consumer, self.value]
        return _LEFT[int(LEAVE.run(client or self.client, keys, args))]


class Heartbeat(threading.Thread):
    """Refreshes the lease on a fixed period; no other write can stop or delay the refresh.

    It is a thread, not a step of the loop, precisely so that a slow message does not stop
    the lease from being refreshed. Each beat runs ``on_beat`` (the hang watchdog, which
    may give the worker up) and then refreshes the lease; nothing else. Side writes (the
    lag key and the peaks record) run on the same period in a thread of their own,
    :class:`SideWrites`: a side write that fails (a key of the wrong type, a full server)
    or is slow (the in-server count of a backlog whose lag the server no longer knows) is
    logged as ``side_write_failed`` and delays no refresh, so a healthy worker's lease
    never lapses because of one.

    ``on_unreachable`` is told (from either thread) whenever Redis could not be reached.
    """

    def __init__(
        self,
        lease: Lease,
        interval_s: float,
        on_beat: Callable[[], None],
        log_fields: dict[str, str],
        on_taken: Callable[[], None] | None = None,
        side_writes: Callable[[], object] | None = None,
        on_unreachable: Callable[[], None] | None = None,
        failures: SideWriteFailures | None = None,
    ) -> None:
        super().__init__(name="heartbeat", daemon=True)
        self.lease = lease
        self.interval_s = interval_s
        self.on_beat = on_beat
        self.log = BoundLogger(log, log_fields)
        self.on_taken = on_taken
        self.on_unreachable = on_unreachable
        self._halt = threading.Event()
        #: shared with the loop's own side writes (``failures``), so one streak is one line
        self.failures = failures or SideWriteFailures(log_fields)
        self.side: SideWrites | None = None
        if side_writes is not None:
            self.side = SideWrites(
                side_writes, interval_s, self._halt, self.failures, on_unreachable
            )

    def start(self) -> None:
        super().start()
        if self.side is not None:
            self.side.start()

    def run(self) -> None:
        while not self._halt.wait(self.interval_s):
            self.beat()

    def beat(self) -> None:
        started = time.monotonic()
        try:
            self.on_beat()  # first: the watchdog may decide the worker is hung
        except Exception:  # the refresh must outlive any bad check
            self.log.exception("heartbeat_error")
        if self._halt.is_set():
            return
        try:
            self._refresh()
        except (*TRANSIENT_ERRORS, *FAILOVER_ERRORS) as exc:
            if self.on_unreachable is not None:
                self.on_unreachable()  # leases may expire meanwhile: see recovery_grace.py
            self.log.warning("heartbeat_failed", extra={"error": str(exc)})
        except redis.ResponseError as exc:  # e.g. OOM: the lease may lapse, nothing to fix here
            self.log.warning("heartbeat_failed", extra={"error": str(exc)})
        except Exception:  # the heartbeat must outlive any single bad beat
            self.log.exception("heartbeat_error")
        elapsed = time.monotonic() - started
        if elapsed > self.interval_s:
            self.log.warning("heartbeat_slow", extra={"elapsed_s": round(elapsed, 3)})

    def _refresh(self) -> None:
        refreshed = self.lease.refresh()
        if refreshed == "retaken":
            self.log.warning("lease_lost", extra={"lease": self.lease.key})
        elif refreshed == "taken":
            self.log.error(
                "lease_taken",
                extra={
                    "lease": self.lease.key,
                    "error": "another process took this consumer name while this one "
                    "stalled; stopping so the two never act as one consumer",
                },
            )
            self._halt.set()
            if self.on_taken is not None:
                self.on_taken()

    def stop(self, timeout_s: float = 5.0) -> bool:
        """Halt both threads; from another thread, wait until they have ended, at most
        ``timeout_s`` for both together (a beat stuck in a call to a frozen server is
        left behind: both are daemon threads). True if both have ended."""
        self._halt.set()
        current = threading.current_thread()
        if current is self or current is self.side:  # e.g. the watchdog giving up: no wait
            return False
        deadline = time.monotonic() + timeout_s
        for thread in (self, self.side):
            if thread is not None and thread.is_alive():
                thread.join(timeout=max(deadline - time.monotonic(), 0.0))
        return not any(t is not None and t.is_alive() for t in (self, self.side))


def heartbeat_interval_s(lease_ttl_ms: int, lag_key_ttl_s: int) -> float:
    """A third of the shorter of the lease TTL and the lag key TTL: two beats may be missed."""
    return min(lease_ttl_ms / 1000, lag_key_ttl_s) / 3
