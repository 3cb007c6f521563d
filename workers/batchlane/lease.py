"""The batch lane's lease: one worker of the fleet runs a stream's batch lane at a time.

Submitting is the one step that must never happen twice for a batch, and a batch's
polls and commits are cheap to leave to one worker, so the lane is held by one worker
(:class:`LaneLease`, a key set with ``NX`` and a TTL of ``SENTINEL_LEASE_TTL_MS``,
refreshed by its holder on every pass of its loop). A worker that dies stops refreshing
it; once it lapses another worker takes the lane over and resumes the dead one's batches
from the ledger. Refreshing and releasing compare the holder first, so a worker that
lost the lease (paused past its TTL) never extends or deletes its successor's.
"""

from __future__ import annotations

import threading

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

    def take(self) -> bool:
        """Take the lease if it is free (or already ours, then refreshed)."""
        if self.client.set(self.key, self.holder, nx=True, px=self.ttl_ms):
            return True
        return self.refresh()

    def refresh(self) -> bool:
        """Whether the lease is still ours (its TTL renewed)."""
        return bool(self._refresh(keys=[self.key], args=[self.holder, self.ttl_ms]))

    def wait(self, stop: threading.Event) -> bool:
        """Wait for the lease (True) or the stop (False), looking every third of a TTL."""
        while not stop.is_set():
            if self.take():
                return True
            stop.wait(self.ttl_ms / 3000)
        return False

    def release(self) -> None:
        """Give the lease up, if it is still ours."""
        self._release(keys=[self.key], args=[self.holder])
