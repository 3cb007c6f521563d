"""The re-screen queue's keys: its own markers, leases and lag, the stream's results and
DLQ, and on a cluster every key in the stream's hash slot."""

from __future__ import annotations

from pathlib import Path

import pytest
from redis.crc import key_slot

from sentinel_platform.settings import load_settings
from sentinel_platform.streams.plumbing.keys import holdings_key, transaction_keys
from workers.rescreening.queue_keys import rescreen_keys


@pytest.mark.parametrize("cluster", [False, True], ids=["single", "cluster"])
def test_the_queue_is_a_stream_of_its_own_whose_results_are_the_streams(
    tmp_path: Path, cluster: bool
) -> None:
    settings = load_settings(home=tmp_path, redis_cluster=cluster)
    keys = transaction_keys(settings)
    queue = rescreen_keys(keys)
    assert (queue.stream, queue.group) == (keys.rescreen, keys.group)
    assert (queue.results, queue.dlq, queue.recent) == (keys.results, keys.dlq, None)
    own = [queue.lag, queue.paused, queue.lease_prefix, queue.marker_prefix, queue.consumers]
    theirs = [keys.lag, keys.paused, keys.lease_prefix, keys.marker_prefix, keys.consumers]
    assert all(mine != live for mine, live in zip(own, theirs, strict=True))
    assert holdings_key(queue) != holdings_key(keys)
    if cluster:
        slot = key_slot(keys.stream.encode())
        named = [*own, queue.stream, queue.results, queue.dlq, holdings_key(queue)]
        assert {key_slot(key.encode()) for key in named} == {slot}
