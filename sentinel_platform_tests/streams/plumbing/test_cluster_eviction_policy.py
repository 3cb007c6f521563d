"""On a Redis Cluster the eviction policy is read from every primary; the worst decides."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.eviction_policy import read_policies, server_verdict
from sentinel_platform_tests.harness.redis_cluster import RedisClusterProcess

pytestmark = pytest.mark.cluster


@pytest.fixture
def last_primary(redis_cluster: RedisClusterProcess) -> Iterator[int]:
    """The port of one primary; its ``maxmemory-policy`` is reset after the test."""
    port = redis_cluster.ports[-1]
    yield port
    with redis_cluster.node_client(port) as client:
        client.config_set("maxmemory-policy", "noeviction")


def test_one_evicting_primary_refuses_the_whole_cluster(
    cluster_client: RedisClient, redis_cluster: RedisClusterProcess, last_primary: int
) -> None:
    assert set(read_policies(cluster_client).values()) == {"noeviction"}
    assert len(read_policies(cluster_client)) == len(redis_cluster.ports)
    assert server_verdict(cluster_client, allow_evicting=False).level == "ok"

    with redis_cluster.node_client(last_primary) as node:
        node.config_set("maxmemory-policy", "allkeys-lru")

    verdict = server_verdict(cluster_client, allow_evicting=False)
    assert verdict.refused and verdict.policy == "allkeys-lru"
    assert f":{last_primary}" in verdict.message
