"""Retention of the source streams: trim only what every group has finished with.

Nothing else trims ``transactions`` or ``synapse:axioms``, so without this every published
row would stay in Redis memory. The rule is safe by construction: ``XTRIM MINID`` below
the *safe id*, the lowest of, per consumer group of the stream,

* its oldest pending id (delivered, not yet acknowledged: it may still be retried), or,
  with nothing pending, the id right after its last-delivered id (nothing later has been
  delivered to it);

and, from settings, the id of ``now - SENTINEL_STREAM_RETENTION_S`` (acknowledged entries
stay readable that long, for replays and dashboards). A stream without a group is never
trimmed. Group positions only move forward, so a threshold computed from them stays
safe until the trim runs.

Effects are deduplicated by markers that live ``SENTINEL_IDEMPOTENCY_TTL_S``; the settings
require the retention to be shorter, so every entry still in the stream is covered by a
live marker (re-reading it, after a group reset for instance, applies nothing twice).
With retention off nothing bounds an entry's age: the workers then dead-letter an entry
older than the markers (``expired_marker``) instead of applying it (``entry_age.py``).

Workers run :meth:`Retention.maybe_trim` from their loop, at most once per
``SENTINEL_STREAM_RETENTION_INTERVAL_S``; it costs a few round trips and never fails the
loop (a failed trim is retried at the next interval).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import redis

from sentinel_platform.logs import BoundLogger
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys

log = logging.getLogger(__name__)

StreamId = tuple[int, int]


@dataclass(frozen=True)
class GroupPosition:
    """Where one group stands: its last-delivered id and its oldest pending id (if any)."""

    name: str
    last_delivered_id: str
    oldest_pending_id: str | None


@dataclass(frozen=True)
class RetentionState:
    """How much of a stream is retained, for ``sentinel status`` and the sensors."""

    entries: int
    oldest_id: str | None
    safe_id: str | None

    def oldest_age_s(self, now_ms: int) -> float | None:
        if self.oldest_id is None:
            return None
        return max(0.0, (now_ms - parse_id(self.oldest_id)[0]) / 1000)


def parse_id(value: str) -> StreamId:
    ms, _, seq = value.partition("-")
    return int(ms), int(seq or 0)


def format_id(value: StreamId) -> str:
    return f"{value[0]}-{value[1]}"


def successor(value: str) -> str:
    ms, seq = parse_id(value)
    return format_id((ms, seq + 1))


def group_floor(group: GroupPosition) -> str:
    """The lowest id this group may still need (entries below it are done for it)."""
    if group.oldest_pending_id is not None:
        return group.oldest_pending_id
    return successor(group.last_delivered_id)


def safe_trim_id(groups: Sequence[GroupPosition], now_ms: int, retention_s: int) -> str | None:
    """The MINID below which every entry may be trimmed; None when nothing may be.

    Entries older than ``retention_s`` and finished by every group, nothing else.
    """
    if not groups:
        return None
    floors = [parse_id(group_floor(group)) for group in groups]
    age_floor = (max(0, now_ms - retention_s * 1000), 0)
    threshold = min([*floors, age_floor])
    if threshold <= (0, 1):
        return None
    return format_id(threshold)


def group_positions(client: RedisClient, stream: str) -> list[GroupPosition]:
    """Every group of ``stream`` with its last-delivered and oldest pending id."""
    try:
        groups = client.xinfo_groups(stream)
    except redis.ResponseError:  # no such stream
        return []
    pipe = client.pipeline(transaction=False)
    for group in groups:
        pipe.xpending(stream, group["name"])
    summaries = pipe.execute() if groups else []
    return [
        GroupPosition(
            name=group["name"],
            last_delivered_id=group["last-delivered-id"],
            oldest_pending_id=summary.get("min") if summary.get("pending") else None,
        )
        for group, summary in zip(groups, summaries, strict=True)
    ]


def retention_state(client: RedisClient, keys: StreamKeys, settings: Settings) -> RetentionState:
    """Entries retained, the oldest one's id, and the id a trim would go up to now."""
    pipe = client.pipeline(transaction=False)
    pipe.xlen(keys.stream)
    pipe.xrange(keys.stream, "-", "+", count=1)
    entries, first = pipe.execute()
    positions = group_positions(client, keys.stream)
    safe = safe_trim_id(positions, _now_ms(client), settings.retention_window_s)
    return RetentionState(int(entries), first[0][0] if first else None, safe)


def trim(client: RedisClient, keys: StreamKeys, settings: Settings) -> int:
    """Trim the stream up to the safe id; the number of entries removed."""
    positions = group_positions(client, keys.stream)
    threshold = safe_trim_id(positions, _now_ms(client), settings.retention_window_s)
    if threshold is None:
        return 0
    return int(client.xtrim(keys.stream, minid=threshold, approximate=False))


def _now_ms(client: RedisClient) -> int:
    """The server's clock: stream ids are stamped with it, not with ours."""
    seconds, micros = client.time()
    return int(seconds) * 1000 + int(micros) // 1000


class Retention:
    """Runs :func:`trim` for one worker at most once per interval; never raises."""

    def __init__(
        self,
        client: RedisClient,
        keys: StreamKeys,
        settings: Settings,
        log_fields: dict[str, str],
    ) -> None:
        self.client = client
        self.keys = keys
        self.settings = settings
        self.log = BoundLogger(log, log_fields)
        self.enabled = settings.stream_retention_enabled
        self._next = time.monotonic() + settings.stream_retention_interval_s

    def maybe_trim(self) -> int:
        now = time.monotonic()
        if not self.enabled or now < self._next:
            return 0
        self._next = now + self.settings.stream_retention_interval_s
        try:
            removed = trim(self.client, self.keys, self.settings)
        except (redis.RedisError, redis.exceptions.RedisClusterException) as exc:
            self.log.warning("retention_failed", extra={"error": str(exc)})
            return 0
        if removed:
            self.log.info("stream_trimmed", extra={"removed": removed})
        return removed


def retention_summary(client: RedisClient, keys: StreamKeys, settings: Settings) -> dict[str, Any]:
    """What ``sentinel status`` and the stream observations show about retention."""
    state = retention_state(client, keys, settings)
    age = state.oldest_age_s(_now_ms(client))
    return {
        "entries": state.entries,
        "oldest_age_s": None if age is None else round(age, 1),
        "window_s": settings.retention_window_s,
        "enabled": settings.stream_retention_enabled,
    }


def describe(summary: dict[str, Any]) -> str:
    """One human line for ``sentinel status``."""
    oldest = summary["oldest_age_s"]
    age = "-" if oldest is None else _duration(oldest)
    policy = (
        f"acknowledged entries kept {_duration(summary['window_s'])}"
        if summary["enabled"]
        else "retention off: never trimmed"
    )
    return f"  retained {summary['entries']} entries, oldest {age} old; {policy}"


def _duration(seconds: float) -> str:
    for unit, size in (("d", 86_400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds / size:.1f}{unit}"
    return f"{seconds:.0f}s"


def retained_entries(client: RedisClient, keys: StreamKeys) -> int:
    """Entries the stream holds now (what retention keeps in memory); 0 without a stream."""
    return int(client.xlen(keys.stream))
