"""On a Redis Cluster the workers' in-flight figures live in their stream's slot, are
written on the lag side write's pipeline and read, pruned and summed there."""

from __future__ import annotations

import pytest

from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.holdings import (
    publish_holding,
    queue_holding,
    read_allowance,
)
from sentinel_platform.streams.backlog.lag import queue_lag_key
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import all_stream_keys, holding_key, holdings_key
from sentinel_platform_tests.harness.redis_cluster import RedisClusterProcess
from sentinel_platform_tests.harness.waits import wait_until

pytestmark = pytest.mark.cluster


def _server_slot(cluster: RedisClusterProcess, key: str) -> int:
    with cluster.node_client(cluster.ports[0]) as node:
        return int(node.execute_command("CLUSTER KEYSLOT", key))


def test_the_figures_share_the_streams_slot_and_sum_on_the_cluster(
    redis_cluster: RedisClusterProcess, cluster_settings: Settings, cluster_client: RedisClient
) -> None:
    for keys in all_stream_keys(cluster_settings):
        slot = _server_slot(redis_cluster, keys.stream)
        assert _server_slot(redis_cluster, holdings_key(keys)) == slot
        assert _server_slot(redis_cluster, holding_key(keys, "host-1234-ab")) == slot

        pipe = cluster_client.pipeline(transaction=False)  # the worker's side write
        queue_lag_key(pipe, keys, 5, 10)
        queue_holding(pipe, keys, "host-1234-ab", 8, 10)
        pipe.execute()
        publish_holding(cluster_client, keys, "dies", 3, 1)
        assert read_allowance(cluster_client, keys) == 11
        wait_until(lambda k=keys: read_allowance(cluster_client, k) == 8, 10, what="lapsed")
        assert cluster_client.zrange(holdings_key(keys), 0, -1) == ["host-1234-ab"]
        assert cluster_client.get(keys.lag) == "5"
