"""The newest result entries of a stream, read once for every figure ``sentinel status``
draws from them.

The verdict mix (:mod:`~sentinel_platform.streams.backlog.verdict_mix`: the last
minutes) and the quality line (:mod:`~sentinel_platform.streams.backlog.recent_quality`:
the last hours) both read the newest results back from the server's clock. One bounded
``XREVRANGE`` per results key serves both: the widest window at the largest cap, from
which a narrower window at a smaller cap is the prefix of entries newer than its start
(:meth:`RecentResults.within`), exactly what its own read would have returned, since
the entries come newest first.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import redis

from sentinel_platform.streams.backlog.entry_ages import server_now_s
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.replies import Entry, entries


def entry_ms(entry_id: str) -> int:
    """The server time (ms) an entry id was stamped with."""
    return int(entry_id.split("-")[0])


@dataclass(frozen=True)
class RecentResults:
    """The entries of each results key read, newest first, back ``window_s`` seconds
    from ``now_ms`` (the server's clock), at most ``cap`` per key."""

    now_ms: int
    window_s: int
    cap: int
    by_key: tuple[tuple[Entry, ...], ...]

    def within(self, window_s: int, cap: int) -> list[list[Entry]]:
        """Per key, what a read back ``window_s`` seconds of at most ``cap`` entries would
        have returned (both no wider than this read's)."""
        if window_s > self.window_s or cap > self.cap:
            raise ValueError(f"a {window_s} s window of {cap} is wider than the read")
        since = self.now_ms - window_s * 1000
        return [[e for e in read if entry_ms(e[0]) >= since][:cap] for read in self.by_key]

    def rows(self) -> list[Entry]:
        """Every entry read, of every key."""
        return [entry for read in self.by_key for entry in read]


def read_recent(
    client: RedisClient, results_keys: Iterable[str], window_s: int, cap: int
) -> RecentResults:
    """The entries of each of ``results_keys`` (each read once) back ``window_s`` seconds,
    at most ``cap`` each, newest first. An absent key, or one holding something else,
    reads as none."""
    now_ms = int(server_now_s(client) * 1000)
    since_ms = now_ms - window_s * 1000
    reads = []
    for key in dict.fromkeys(results_keys):
        try:
            reads.append(
                tuple(entries(client.xrevrange(key, max="+", min=str(since_ms), count=cap)))
            )
        except redis.ResponseError:  # the key holds something else: say nothing
            reads.append(())
    return RecentResults(now_ms, window_s, cap, tuple(reads))
