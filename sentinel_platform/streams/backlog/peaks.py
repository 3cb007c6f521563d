"""Per-stream lag peaks and backpressure episodes, kept in Redis between two sensor ticks.

The lag sensor samples the lag every few seconds and so misses anything shorter: a spike
to 225 that lasts two seconds never reaches its plot. Whoever sees the lag first (a
worker when it writes the lag key, the publisher's backpressure guard before each batch)
records it here; the sensor reads and resets the record once per tick and reports the
peak next to the current lag.

One sorted set per stream (``<lag key>:peaks``, in the stream's hash slot on a cluster)
holds three members: ``lag_peak`` (the high-water mark, raised with ``ZADD GT`` so
concurrent writers never lower it), ``hard_episodes`` and ``soft_episodes`` (counted with
``ZINCRBY``). Both commands are atomic on the server; reading and deleting run in one
``MULTI``, so nothing recorded between the two is lost. The key expires after
``PEAKS_TTL_S`` so a stream nobody watches leaves nothing behind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys

PEAK = "lag_peak"
HARD = "hard_episodes"
SOFT = "soft_episodes"
#: A record nobody reads for a day is stale.
PEAKS_TTL_S = 86_400

Episode = Literal["hard", "soft"]


def peaks_key(keys: StreamKeys) -> str:
    """Derived from the lag key, so it shares the stream's hash slot on a cluster."""
    return f"{keys.lag}:peaks"


@dataclass(frozen=True)
class Peaks:
    """What was seen since the last read: the highest lag and the episodes started."""

    lag_peak: int | None = None
    hard_episodes: int = 0
    soft_episodes: int = 0

    @property
    def empty(self) -> bool:
        return self.lag_peak is None and not self.hard_episodes and not self.soft_episodes


def record_lag(client: RedisClient, keys: StreamKeys, lag: int) -> None:
    """Raise the stream's high-water mark to ``lag`` if it is higher (never lowers it)."""
    pipe = client.pipeline(transaction=False)
    queue_record_lag(pipe, keys, lag)
    pipe.execute()


def queue_record_lag(pipe: Any, keys: StreamKeys, lag: int) -> None:
    """Queue :func:`record_lag` on ``pipe``, so a caller can send it with its own writes."""
    key = peaks_key(keys)
    pipe.zadd(key, {PEAK: int(lag)}, gt=True)
    pipe.expire(key, PEAKS_TTL_S)


def record_episode(client: RedisClient, keys: StreamKeys, kind: Episode, lag: int) -> None:
    """Count one backpressure episode of ``kind`` that started at ``lag``."""
    key = peaks_key(keys)
    pipe = client.pipeline(transaction=False)
    pipe.zincrby(key, 1, HARD if kind == "hard" else SOFT)
    pipe.zadd(key, {PEAK: int(lag)}, gt=True)
    pipe.expire(key, PEAKS_TTL_S)
    pipe.execute()


def take_peaks(client: RedisClient, keys: StreamKeys) -> Peaks:
    """Read and reset the record in one transaction: each peak is reported exactly once."""
    key = peaks_key(keys)
    pipe = client.pipeline(transaction=True)
    pipe.zrange(key, 0, -1, withscores=True)
    pipe.delete(key)
    members, _ = pipe.execute()
    scores = {_text(member): int(score) for member, score in members}
    return Peaks(
        lag_peak=scores.get(PEAK),
        hard_episodes=scores.get(HARD, 0),
        soft_episodes=scores.get(SOFT, 0),
    )


def _text(member: str | bytes) -> str:
    return member.decode() if isinstance(member, bytes) else member
