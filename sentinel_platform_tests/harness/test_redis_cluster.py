"""The Redis Cluster fixture is a real, healthy 3-primary cluster the platform can use."""

from __future__ import annotations

import pytest
from redis.cluster import RedisCluster
from redis.crc import key_slot

from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform_tests.harness.redis_cluster import RedisClusterProcess

pytestmark = pytest.mark.cluster


def test_cluster_has_three_primaries_serving_every_slot(
    redis_cluster: RedisClusterProcess,
) -> None:
    with redis_cluster.node_client(redis_cluster.ports[0]) as node:
        info = node.cluster("INFO")
        nodes = node.cluster("NODES")
    assert info["cluster_state"] == "ok"
    assert int(info["cluster_slots_ok"]) == 16384
    primaries = sorted(addr for addr, n in nodes.items() if "master" in n["flags"])
    assert primaries == sorted(f"127.0.0.1:{port}" for port in redis_cluster.ports)
    assert all(nodes[addr]["slots"] for addr in primaries)


def test_platform_connects_with_the_cluster_client(
    cluster_settings: Settings, cluster_client: RedisClient
) -> None:
    assert cluster_settings.is_cluster
    assert isinstance(cluster_client, RedisCluster)
    cluster_client.set("{transactions}:probe", "1")
    cluster_client.set("{synapse:axioms}:probe", "2")
    assert cluster_client.get("{transactions}:probe") == "1"
    assert cluster_client.get("{synapse:axioms}:probe") == "2"


def test_the_two_stream_tags_land_on_different_shards(
    redis_cluster: RedisClusterProcess, cluster_client: RedisClient
) -> None:
    transactions = redis_cluster.port_for_key("{transactions}")
    axioms = redis_cluster.port_for_key("{synapse:axioms}")
    assert transactions != axioms
    assert isinstance(cluster_client, RedisCluster)
    node = cluster_client.get_node_from_key("{transactions}:dlq")
    assert node.port == transactions
    assert key_slot(b"{transactions}:dlq") == key_slot(b"transactions")
