"""How old a message is: from the time in its stream entry id, on the server's clock.

A stream entry id is ``<milliseconds>-<sequence>``, stamped with the server's clock when
the entry was added, so a message's age needs no field of its own: it is *now* minus
that time. Two figures are built on it: the age of a message when its effect is committed
(end-to-end, queueing included; the worker's ``commit_age_seconds``) and the age of the
group's oldest pending message (delivered, not yet acknowledged, whichever consumer holds
it), which grows without bound when a message is stuck and nothing recovers it.

The oldest pending entry is the first row of ``XPENDING <stream> <group> - + 1``: one
round trip, whatever the size of the pending list. Ages are measured against the
server's clock (``TIME``) when a client is at hand, so a host whose clock is off does
not report a skewed age.
"""

from __future__ import annotations

import redis

from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform.streams.plumbing.replies import pending_rows


def entry_time_s(entry_id: str) -> float:
    """The time in stream entry id ``entry_id`` in epoch seconds; a value that is not an
    entry id raises ``ValueError``."""
    millis, _, _sequence = entry_id.partition("-")
    return int(millis) / 1000


def age_s(entry_id: str, now_s: float) -> float:
    """Seconds from the time in ``entry_id`` to ``now_s``; never negative (a clock behind
    the server's reads 0, not a negative age)."""
    return max(0.0, now_s - entry_time_s(entry_id))


def server_now_s(client: RedisClient) -> float:
    """The server's clock in epoch seconds: entry ids are stamped with it, not ours."""
    seconds, micros = client.time()
    return int(seconds) + int(micros) / 1_000_000


def oldest_pending_id(client: RedisClient, keys: StreamKeys) -> str | None:
    """The id of the group's oldest pending entry; None when nothing is pending (or there
    is no stream or group yet)."""
    try:
        rows = pending_rows(
            client.xpending_range(keys.stream, keys.group, min="-", max="+", count=1)
        )
    except redis.ResponseError:  # NOGROUP: no stream or group yet
        return None
    return str(rows[0]["message_id"]) if rows else None


def oldest_pending_age_s(client: RedisClient, keys: StreamKeys, now_s: float) -> float:
    """The age of the group's oldest pending message at ``now_s``; 0 when none is pending."""
    oldest = oldest_pending_id(client, keys)
    return 0.0 if oldest is None else age_s(oldest, now_s)
