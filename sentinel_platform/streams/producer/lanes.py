"""Where a publish writes in each lane: the stream itself (real time) or its batch lane.

A partition published for the batch lane goes to ``batch_stream_key`` of the stream (of
each shard, for a sharded stream: every shard's batch lane lives in the shard's own hash
slot, beside the keys its workers' batch ledger writes), with the same wire fields,
through the same executors. Only the target differs, so :func:`lane_keys` gives the keys
to publish to with nothing else changed; the batch lane is never paced on the stream's
lag (:attr:`~sentinel_platform.streams.producer.partition_publisher.PartitionPublisher.paced`):
its messages wait for a provider's batch, never for the live workers.
"""

from __future__ import annotations

import dataclasses

from sentinel_platform.settings.batch import Lane
from sentinel_platform.streams.plumbing.keys import StreamKeys, batch_stream_key


def lane_keys(keys: StreamKeys, lane: Lane) -> StreamKeys:
    """``keys`` with ``stream`` the one ``lane`` publishes to: itself for ``realtime``,
    its batch lane (``batch_stream_key``) for ``batch``."""
    if lane == "realtime":
        return keys
    return dataclasses.replace(keys, stream=batch_stream_key(keys))
