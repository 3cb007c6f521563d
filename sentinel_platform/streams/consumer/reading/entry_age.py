"""Entries older than their idempotency marker are not applied when retention is off.

An effect is deduplicated by its marker (``idempotency.py``), which lives
``SENTINEL_IDEMPOTENCY_TTL_S`` from its commit, and a commit comes after the entry was
added: while an entry is younger than the TTL, the marker of any earlier application still
exists, so re-reading it (a group recreated at 0, ``XGROUP SETID``) applies nothing twice.

With retention on, the settings keep every acknowledged entry shorter than the markers
(``Settings._retention_within_markers``): an entry older than the TTL that is still in the
stream was never acknowledged by its group, and applying it is its first application.

With ``SENTINEL_STREAM_RETENTION_ENABLED=false`` nothing bounds an entry's age, and an old
entry may be either a first read or a re-read whose marker has expired; nothing tells them
apart. The rule: such an entry (its id's millisecond part older than now - TTL + margin)
is dead-lettered ``expired_marker`` with its full payload, never applied. Nothing is lost
(the operator replays it, as a new entry, or purges it) and nothing is applied twice. The
margin (a tenth of the TTL, at most an hour) covers the time between this decision and
the commit, and a worker clock behind the server's (ids carry the server's time).
"""

from __future__ import annotations

import time

from sentinel_platform.settings import Settings

#: ``error`` of an ``expired_marker`` dead letter: what happened and what to do.
EXPIRED_MARKER_ERROR = (
    "entry is older than SENTINEL_IDEMPOTENCY_TTL_S, with SENTINEL_STREAM_RETENTION_ENABLED="
    "false: its idempotency marker may have expired, so applying it could apply its effect "
    "twice; not applied. If it was never applied (e.g. a backlog after a long outage), "
    "`sentinel dlq replay` it; otherwise `sentinel dlq purge` it. See docs/dead-letters.md."
)
#: Largest margin kept below the TTL, in milliseconds.
MAX_MARGIN_MS = 3_600_000


def margin_ms(ttl_s: int) -> int:
    """How much younger than the TTL an entry must be to be applied: a tenth, at most 1 h."""
    return min(MAX_MARGIN_MS, ttl_s * 100)


def too_old(message_id: str, now_ms: int, ttl_s: int, retention_enabled: bool) -> bool:
    """Whether the entry ``message_id`` must not be applied (see the module docstring)."""
    if retention_enabled:
        return False
    added_ms = int(message_id.partition("-")[0])
    return now_ms - added_ms >= ttl_s * 1000 - margin_ms(ttl_s)


def entry_too_old(message_id: str, settings: Settings) -> bool:
    """:func:`too_old` now, with the worker's settings (the consumer's hook)."""
    if settings.stream_retention_enabled:  # the hot path: decided without a clock read
        return False
    return too_old(
        message_id,
        int(time.time() * 1000),
        settings.idempotency_ttl_s,
        settings.stream_retention_enabled,
    )
