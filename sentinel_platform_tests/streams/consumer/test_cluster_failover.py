"""Workers ride through a ``CLUSTER FAILOVER`` of the shard that serves their stream.

A 3-primary cluster of its own (the session cluster stays untouched), plus one replica
of the primary serving ``transactions``. Mid-stream the replica takes over, either with
``CLUSTER FAILOVER`` (the old primary answers MOVED) or because the primary is SIGKILLed
(connections refused until the replica is elected). Workers must refresh their slot
map, retry with their outcomes kept, and lose or double nothing.
"""

from __future__ import annotations

import contextlib
import os
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import redis
from redis.crc import key_slot

from sentinel_platform.settings import Settings, load_settings
from sentinel_platform.streams.plumbing.connection import RedisClient, connect
from sentinel_platform.streams.plumbing.keys import StreamKeys, transaction_keys
from sentinel_platform_tests.harness.processes import (
    FAST_TIMINGS,
    TEST_PROCESSOR,
    WorkerProcess,
    launch_worker,
)
from sentinel_platform_tests.harness.redis_cluster import (
    ClusterNode,
    RedisClusterProcess,
    find_cluster_binaries,
)
from sentinel_platform_tests.harness.requirements import missing
from sentinel_platform_tests.harness.streams import publish
from sentinel_platform_tests.harness.waits import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

BEFORE, AFTER = 300, 300
EXPECTED_KEYS = {f"a{n}" for n in range(BEFORE)} | {f"b{n}" for n in range(AFTER)}
REDIRECTS = ("MOVED", "ASK", "TRYAGAIN")


@pytest.fixture
def own_cluster(tmp_path: Path) -> Iterator[RedisClusterProcess]:
    found = find_cluster_binaries()
    if isinstance(found, str):
        missing(found)
    server, cli = found
    cluster = RedisClusterProcess(server, cli, tmp_path / "cluster").start()
    try:
        yield cluster
    finally:
        cluster.stop()


def _add_replica(cluster: RedisClusterProcess, primary_port: int, data_dir: Path) -> ClusterNode:
    """Start a node, join it to the cluster and make it a replica of ``primary_port``."""
    primary = next(node for node in cluster.nodes if node.port == primary_port)
    replica = ClusterNode(
        cluster.server_binary, data_dir, config={**cluster._node_config()}
    ).start()
    cluster.nodes.append(replica)  # stopped with the cluster
    client = cluster.node_client(replica.port)
    primary_id = cluster.node_client(primary_port).execute_command("CLUSTER MYID")
    bus_port = primary.config.get("cluster-port", str(primary_port + 10000))
    client.execute_command("CLUSTER MEET", "127.0.0.1", primary_port, bus_port)
    wait_until(lambda: _knows(client, primary_id), 15)
    client.execute_command("CLUSTER REPLICATE", primary_id)
    wait_until(lambda: client.info("replication").get("master_link_status") == "up", 20)
    return replica


def _knows(client: redis.Redis, node_id: str) -> bool:
    nodes = client.execute_command("CLUSTER NODES")
    return any(node.get("node_id") == node_id for node in nodes.values())


def _role(cluster: RedisClusterProcess, port: int) -> str:
    with cluster.node_client(port) as client:
        return str(client.info("replication")["role"])


@dataclass
class Outcome:
    """What the stream and the workers show once both halves are processed."""

    results: Counter[str]
    dead_letters: int
    alive: list[bool]


@contextlib.contextmanager
def _workers_mid_stream(
    cluster: RedisClusterProcess, settings: Settings, tmp_path: Path
) -> Iterator[tuple[RedisClient, list[WorkerProcess]]]:
    """Two workers on ``cluster``, a quarter through the first half; killed on exit."""
    keys = transaction_keys(settings)
    client = connect(settings)
    env = {
        **os.environ,
        **FAST_TIMINGS,
        "REDIS_URL": cluster.url,
        "SENTINEL_HOME": str(settings.home_dir),
        "PYTHONUNBUFFERED": "1",
    }
    workers: list[WorkerProcess] = []
    try:
        workers = [launch_worker(env, tmp_path, processor=TEST_PROCESSOR) for _ in range(2)]
        for worker in workers:
            worker.wait_ready(client, 30)
        publish(client, keys, [{"key": f"a{n}", "sleep_ms": "5"} for n in range(BEFORE)])
        wait_until(lambda: client.xlen(keys.results) >= BEFORE // 4, 30)
        yield client, workers
    finally:
        for worker in workers:
            worker.kill()
        client.close()


def _second_half_processed(
    client: RedisClient, keys: StreamKeys, workers: list[WorkerProcess]
) -> Outcome:
    """Publish the second half, wait until every message is processed and acknowledged."""
    publish_after(client, keys)
    wait_until(lambda: _results(client, keys) >= BEFORE + AFTER, 90)
    wait_until(lambda: not client.xpending(keys.stream, keys.group)["pending"], 30)
    return Outcome(
        results=Counter(fields["key"] for _id, fields in client.xrange(keys.results)),
        dead_letters=client.xlen(keys.dlq) if client.exists(keys.dlq) else 0,
        alive=[worker.proc.poll() is None for worker in workers],
    )


@pytest.mark.parametrize("how", ["cluster_failover", "primary_sigkill"])
def test_workers_ride_through_a_cluster_failover_mid_stream(
    own_cluster: RedisClusterProcess, tmp_path: Path, how: str
) -> None:
    settings = load_settings(redis_url=own_cluster.url, home=tmp_path / "home")
    keys = transaction_keys(settings)
    old_port = own_cluster.port_for_key(keys.stream)
    replica = _add_replica(own_cluster, old_port, tmp_path / "replica")
    with _workers_mid_stream(own_cluster, settings, tmp_path) as (client, workers):
        if how == "cluster_failover":  # coordinated: no write is lost in the hand-over
            own_cluster.node_client(replica.port).execute_command("CLUSTER FAILOVER")
            wait_until(lambda: _role(own_cluster, old_port) == "slave", 30)
        else:  # the primary crashes: its slots are uncovered until the replica takes over
            own_cluster.node_client(old_port).execute_command("WAIT", 1, 5000)
            next(node for node in own_cluster.nodes if node.port == old_port).kill()
        wait_until(lambda: _role(own_cluster, replica.port) == "master", 60)
        outcome = _second_half_processed(client, keys, workers)
    assert set(outcome.results) == EXPECTED_KEYS  # nothing lost
    assert max(outcome.results.values()) == 1  # nothing applied twice
    assert outcome.dead_letters == 0
    assert outcome.alive == [True, True]  # no crash


def test_workers_ride_through_a_reshard_of_their_slot_mid_stream(
    own_cluster: RedisClusterProcess, tmp_path: Path
) -> None:
    """The stream's slot moves to another primary, key by key (ASK, TRYAGAIN, then MOVED)."""
    settings = load_settings(redis_url=own_cluster.url, home=tmp_path / "home")
    keys = transaction_keys(settings)
    source = own_cluster.port_for_key(keys.stream)
    target = next(port for port in own_cluster.ports if port != source)
    with _workers_mid_stream(own_cluster, settings, tmp_path) as (client, workers):
        _move_slot(own_cluster, key_slot(keys.stream.encode()), source, target)
        assert own_cluster.port_for_key(keys.stream) == target
        outcome = _second_half_processed(client, keys, workers)
        with own_cluster.node_client(source) as old_owner:
            errors = old_owner.info("errorstats")
    assert set(outcome.results) == EXPECTED_KEYS
    assert max(outcome.results.values()) == 1
    assert outcome.dead_letters == 0
    assert outcome.alive == [True, True]
    redirects = sum(int(errors.get(f"errorstat_{e}", {}).get("count", 0)) for e in REDIRECTS)
    assert redirects > 0, errors  # the workers really were sent elsewhere mid-stream


def _move_slot(cluster: RedisClusterProcess, slot: int, source: int, target: int) -> None:
    """Migrate one slot as ``--cluster reshard`` does: IMPORTING/MIGRATING, MIGRATE, NODE."""
    src, dst = cluster.node_client(source), cluster.node_client(target)
    src_id, dst_id = src.execute_command("CLUSTER MYID"), dst.execute_command("CLUSTER MYID")
    dst.execute_command("CLUSTER SETSLOT", slot, "IMPORTING", src_id)
    src.execute_command("CLUSTER SETSLOT", slot, "MIGRATING", dst_id)
    while batch := src.execute_command("CLUSTER GETKEYSINSLOT", slot, 10):
        src.execute_command("MIGRATE", "127.0.0.1", target, "", 0, 5000, "KEYS", *batch)
    for port in cluster.ports:
        with cluster.node_client(port) as node:
            node.execute_command("CLUSTER SETSLOT", slot, "NODE", dst_id)


def publish_after(client, keys) -> None:
    """Publish the second half through the cluster client (it follows the new owner)."""
    wait_until(lambda: _publishes(client, keys), 30)


def _publishes(client, keys) -> bool:
    try:
        publish(client, keys, [{"key": f"b{n}", "sleep_ms": "5"} for n in range(AFTER)])
    except (redis.RedisError, redis.exceptions.RedisClusterException):
        return False
    return True


def _results(client, keys) -> int:
    try:
        return int(client.xlen(keys.results))
    except (redis.RedisError, redis.exceptions.RedisClusterException):
        return 0
