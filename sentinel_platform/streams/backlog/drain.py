"""The fleet's drain rate: how many rows/s the consumers complete while work waits.

The lag zones are in seconds of work (:mod:`~sentinel_platform.streams.backlog.zones`), so every
reader needs the rate the fleet drains at. The producers measure it, since they watch the
group before every batch anyway: the group's *completed* count, ``entries-read`` minus
``pending`` (``XINFO GROUPS``), grows by one for each message acknowledged or dead
lettered. Unlike ``entries-read`` alone it does not jump by a whole read at a time, so
the rate of slow processors (seconds per message) is measured too.

:class:`DrainMeter` keeps the readings of the last :data:`WINDOW_S` seconds; the rate is
what the group completed over their span. When the fleet ran idle in between (a reading
with lag 0) the figure is a lower bound of its capacity, which errs on the safe side: the
producer steers to fewer seconds of work, and a lag that reaches 0 is nominal anyway. As
soon as the producer keeps work waiting, the figure is the capacity itself. A rate of 0 is
reported only after a whole window in which work waited and nothing was completed (the
consumers stopped); readings less than :data:`MIN_SPAN_S` apart give no rate.

The producer writes the rate to ``sentinel:drain_rate:<stream>`` and the seconds of work
(lag / rate) to ``sentinel:work_seconds:<stream>``, both with a TTL of :data:`RATE_TTL_S`
(names derived in :mod:`~sentinel_platform.streams.plumbing.keys`). The lag key itself stays the
plain integer message count Sentinel-L7's producers read; those producers keep pacing by
their own counts.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Any

from sentinel_platform.streams.backlog.zones import work_seconds
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, drain_rate_key, work_seconds_key

#: The drain rate is measured over at most this long (and 0 only after this long).
WINDOW_S = 10.0
#: Readings closer together than this give no rate.
MIN_SPAN_S = 0.5
#: A rate nobody refreshed for this long is forgotten (no producer has watched the fleet).
RATE_TTL_S = 300


@dataclass
class DrainMeter:
    """The drain rate over the last :data:`WINDOW_S` of readings during which work waited."""

    window_s: float = WINDOW_S
    min_span_s: float = MIN_SPAN_S
    _readings: deque[tuple[float, int, int]] = field(default_factory=deque, repr=False)

    def observe(self, now: float, completed: int | None, lag: int) -> float | None:
        """Fold one reading in; return the rate it gives (rows/s), or None for none yet."""
        if completed is None:
            self._readings.clear()  # no group (yet): nothing to measure from
            return None
        last = self._readings[-1] if self._readings else None
        if last is not None and (completed < last[1] or now < last[0]):
            self._readings.clear()  # the group was reset (or the clock went back)
        self._readings.append((now, completed, lag))
        while len(self._readings) > 2 and now - self._readings[1][0] >= self.window_s:
            self._readings.popleft()
        first_at, first, _ = self._readings[0]
        span = now - first_at
        if span < self.min_span_s:
            return None
        if completed == first:
            idle = any(waiting <= 0 for _, _, waiting in self._readings)
            if idle or span < self.window_s:
                return None  # nothing to do, or too soon to call the fleet stopped
        return (completed - first) / span


def completed_count(entries_read: int | None, pending: int) -> int | None:
    """Messages the group finished (acknowledged or dead-lettered): read minus pending."""
    return None if entries_read is None else max(0, entries_read - pending)


def queue_drain_rate(pipe: Any, keys: StreamKeys, rate: float, lag: int) -> None:
    """Queue the writes of the drain rate and the seconds of work, with their TTL."""
    pipe.set(drain_rate_key(keys), f"{rate:.3f}", ex=RATE_TTL_S)
    seconds = work_seconds(lag, rate)
    if seconds is None:
        pipe.delete(work_seconds_key(keys))
    else:
        pipe.set(work_seconds_key(keys), f"{seconds:.3f}", ex=RATE_TTL_S)


def write_drain_rate(client: RedisClient, keys: StreamKeys, rate: float, lag: int) -> None:
    pipe = client.pipeline(transaction=False)
    queue_drain_rate(pipe, keys, rate, lag)
    pipe.execute()


def card_rate(published: float | None, read_lately: float | None) -> float | None:
    """The drain rate a reader judges the zone at: the producers' figure; without one, 0
    when the group read nothing over the last minute (``read_lately``, from
    :func:`~sentinel_platform.streams.backlog.progress.progress`: the consumers stopped), else
    unknown."""
    if published is not None:
        return published
    return 0.0 if read_lately == 0 else None


def parse_rate(value: object) -> float | None:
    """A stored rate (``bytes``/``str``), or None when missing or unreadable."""
    if value is None:
        return None
    try:
        rate = float(value.decode() if isinstance(value, bytes) else str(value))
    except ValueError:
        return None
    return rate if rate >= 0 else None


def read_drain_rate(client: RedisClient, keys: StreamKeys) -> float | None:
    """The fleet's last measured drain rate (rows/s), or None when none is recent."""
    return parse_rate(client.get(drain_rate_key(keys)))
