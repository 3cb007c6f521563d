"""The batch lane's lease: one worker of the fleet runs a stream's batch lane at a time.

Submitting is the one step that must never happen twice for a batch, and a batch's
polls and commits are cheap to leave to one worker, so the lane is held by one worker
(:class:`LaneLease`, a key set with ``NX`` and a TTL of ``SENTINEL_LEASE_TTL_MS``). While
it holds the lane, a thread of the lease's own (:meth:`LaneLease.kept`) refreshes it every
third of the TTL, so a long step of the lane (a large upload, a large results file) never
lets it lapse; a worker that dies stops refreshing it, and once it lapses another worker
takes the lane over and resumes the dead one's batches from the ledger. Refreshing and
releasing compare the holder first, so a worker that lost the lease (paused past its
TTL) never extends or deletes its successor's: it sees :attr:`LaneLease.lost` and stops
its lane at the end of its step.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

import redis

from sentinel_platform.streams.plumbing.connection import RedisClient

_REFRESH_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE_LUA = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class LaneLease:
    """The lease ``key`` held as ``holder`` for ``ttl_ms`` at a time."""

    def __init__(self, client: RedisClient, key: str, holder: str, ttl_ms: int) -> None:
        self.client, self.key, self.holder, self.ttl_ms = client, key, holder, ttl_ms
        self._refresh = client.register_script(_REFRESH_LUA)
        self._release = client.register_script(_RELEASE_LUA)
        #: set once a refresh found the lease no longer ours (or could not renew it in time)
        self.lost = threading.Event()

    def take(self) -> bool:
        """Take the lease if it is free (or already ours, then refreshed)."""
        if self.client.set(self.key, self.holder, nx=True, px=self.ttl_ms):
            return True
        return self.refresh()

    def refresh(self) -> bool:
        """Whether the lease is still ours (its TTL renewed)."""
        return bool(self._refresh(keys=[self.key], args=[self.holder, self.ttl_ms]))

    def wait(self, stop: threading.Event) -> bool:
        """Wait for the lease (True) or the stop (False), looking every third of a TTL
        (a server that cannot be reached only delays the next look)."""
        while not stop.is_set():
            try:
                if self.take():
                    return True
            except redis.RedisError:
                pass
            stop.wait(self.ttl_ms / 3000)
        return False

    def release(self) -> None:
        """Give the lease up, if it is still ours."""
        self._release(keys=[self.key], args=[self.holder])

    @contextmanager
    def kept(self, stop: threading.Event) -> Iterator[threading.Event]:
        """Refresh the lease on a thread of its own until the block ends; the block gets
        :attr:`lost`. The thread ends with the block (or the stop), joined within a TTL."""
        self.lost.clear()
        done = threading.Event()
        thread = threading.Thread(target=self._keep, args=(stop, done), name="batch-lease")
        thread.daemon = True
        thread.start()
        try:
            yield self.lost
        finally:
            done.set()
            thread.join(self.ttl_ms / 1000)

    def _keep(self, stop: threading.Event, done: threading.Event) -> None:
        """Refresh every third of the TTL; a refresh refused, or none for a whole TTL
        (Redis unreachable), is the lease lost."""
        every_s = self.ttl_ms / 3000
        while not done.wait(every_s) and not stop.is_set():
            try:
                if not self.refresh():
                    break
            except redis.RedisError:
                if not self._renewed_within(done, every_s):
                    break
        self.lost.set()

    def _renewed_within(self, done: threading.Event, every_s: float) -> bool:
        """After a failed refresh: whether one of the next two, a third of a TTL apart,
        succeeds (the lease then never lapsed)."""
        for _ in range(2):
            if done.wait(every_s / 2):
                return True
            try:
                return self.refresh()
            except redis.RedisError:
                continue
        return False
