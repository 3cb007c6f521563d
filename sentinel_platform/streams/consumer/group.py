"""Creating the consumer group: idempotent, and from the start of the stream.

A group created at ``$`` would silently skip every message published before the first
worker started. Creating at id ``0`` with MKSTREAM means a group made after the producer
ran still sees the whole stream, and a worker that starts before the producer does not
fail on a missing stream.
"""

from __future__ import annotations

import redis

from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys


def ensure_group(client: RedisClient, keys: StreamKeys) -> bool:
    """Create the group at id 0 (and the stream if missing); True if it was created now."""
    try:
        client.xgroup_create(keys.stream, keys.group, id="0", mkstream=True)
    except redis.ResponseError as exc:
        if "BUSYGROUP" in str(exc):
            return False
        raise
    return True
