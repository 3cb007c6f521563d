"""A stream's provisional backlog over its shards: one figure for the whole stream.

Each shard has its own re-screen queue; the contract's one read
(:func:`~sentinel_platform.streams.backlog.provisional.read_provisional`) reads one queue.
:func:`read_shards_provisional` reads every shard's queue once and :func:`combined` folds
them, so ``sentinel status`` and the exporter report the same stream-wide figures: the
verdicts waiting summed, the oldest age the oldest of all.
"""

from __future__ import annotations

from collections.abc import Iterable

from sentinel_platform.streams.backlog.provisional import (
    NOTHING,
    ProvisionalBacklog,
    read_provisional,
)
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys


def combined(backlogs: Iterable[ProvisionalBacklog]) -> ProvisionalBacklog:
    """Several queues' backlogs as one: waiting summed, the oldest age the largest of
    those known (:data:`NOTHING` when none waits)."""
    waiting, ages = 0, []
    for backlog in backlogs:
        waiting += backlog.waiting
        if backlog.oldest_age_s is not None:
            ages.append(backlog.oldest_age_s)
    if not waiting:
        return NOTHING
    return ProvisionalBacklog(waiting, max(ages) if ages else None)


def read_shards_provisional(
    client: RedisClient, shards: Iterable[StreamKeys]
) -> ProvisionalBacklog:
    """The provisional backlog of a stream whose shards' keys are ``shards``: each
    distinct re-screen queue read once (shards sharing a queue are not counted twice)."""
    queues = {shard.rescreen: shard for shard in shards if shard.rescreen}
    return combined(read_provisional(client, keys) for keys in queues.values())
