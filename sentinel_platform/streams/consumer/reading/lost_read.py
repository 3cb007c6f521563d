"""Taking back a read whose reply was lost: its batch, from the PEL, as first deliveries.

``XREADGROUP`` is sent once (``group_read.py``): a reply lost on the way (a connection cut
after the server ran it) leaves a batch in the worker's PEL that it never saw. Its
pending messages that are first deliveries, not in hand and not failures waiting out
their retry backoff (those have an error record) can only come from that read.
:func:`lost_read` fetches their bodies with XRANGE: re-reading them with
``XREADGROUP ... 0`` would count a delivery the processor never saw.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from typing import Any

from sentinel_platform.streams.consumer.outcomes import Delivery
from sentinel_platform.streams.consumer.settling.attempts import read_attempts
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys


def lost_candidates(held: Sequence[Mapping[str, Any]], in_hand: Collection[str]) -> list[str]:
    """Our pending entries that a lost read may have delivered: first deliveries only,
    none we are handling."""
    return [
        str(entry["message_id"])
        for entry in held
        if entry["times_delivered"] == 1 and entry["message_id"] not in in_hand
    ]


def lost_read(
    client: RedisClient, keys: StreamKeys, consumer: str, scan: int, in_hand: Collection[str]
) -> list[Delivery]:
    """The messages a lost read delivered to ``consumer``, with their bodies; looks
    through at most ``scan`` of its pending entries."""
    held = client.xpending_range(keys.stream, keys.group, "-", "+", scan, consumername=consumer)
    candidates = lost_candidates(held, in_hand)
    failed = read_attempts(client, keys, candidates)
    lost = [m for m in candidates if not (failed.get(m) and failed[m].last_error)]
    pipe = client.pipeline(transaction=False)
    for message_id in lost:
        pipe.xrange(keys.stream, message_id, message_id)
    return [Delivery(i, f or {}, 1) for rows in pipe.execute() for i, f in rows]
