"""Real worker processes serve every shard of a sharded stream on a real 3-primary Redis
Cluster (``workers.shards``): each worker one consumer per shard, every shard on a
master of its own; what a Sentinel-L7 producer adds to the base key is forwarded to its
key's shard (an invalid entry dead-lettered there with its payload); a worker SIGKILLed
mid-stream has its messages recovered by the survivor, each key's effect once on its
shard; the stream's one lag is at its logical key; the worker's one metrics endpoint
carries the shard; SIGTERM stops every shard's consumer; a count other than the recorded
one is refused at start-up."""

from __future__ import annotations

import json
import urllib.request

import pytest

from sentinel_platform.exit_codes import EXIT_USAGE
from sentinel_platform.redis_server import free_port
from sentinel_platform.registry import StreamSpec
from sentinel_platform.schemas import DeadLetter
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, keys_for
from sentinel_platform.streams.sharding.record import record_key, recorded_tags
from sentinel_platform.streams.sharding.routing import shard_of
from sentinel_platform.streams.sharding.shards import keys_of_shards
from sentinel_platform_tests.harness.cli import run_sentinel
from sentinel_platform_tests.harness.fixtures.services import SHARDED_MODULE
from sentinel_platform_tests.harness.processes import StartWorker, WorkerProcess
from sentinel_platform_tests.harness.redis_cluster import RedisClusterProcess
from sentinel_platform_tests.harness.streams import publish
from sentinel_platform_tests.harness.suite_on_cluster import worker_env  # noqa: F401 (workers on the cluster)
from sentinel_platform_tests.harness.waits import wait_until
from workers.forwarding import FORWARD_IDLE_MS

pytestmark = pytest.mark.cluster

ENV = {"SENTINEL_STREAM_MODULES": SHARDED_MODULE}
KEYS = [f"k{n}" for n in range(120)]
#: Added to the base key, as a Sentinel-L7 producer does.
BASE_KEYS = [f"b{n}" for n in range(30)]
INVALID = {"key": "bad", "sleep_ms": "soon"}
ROUTED_INVALID = {"key": "bad-too", "sleep_ms": "later"}


def _results(client: RedisClient, shard: StreamKeys) -> list[str]:
    return [fields["key"] for _id, fields in client.xrange(shard.results)]


def _settled(client: RedisClient, shard: StreamKeys) -> list[str] | None:
    """The shard's results, sorted (a key twice: a second effect), once nothing is pending."""
    if int(client.xpending(shard.stream, shard.group)["pending"]):
        return None
    return sorted(_results(client, shard))


def _pending_on(client: RedisClient, shard: StreamKeys, consumer: str) -> int:
    summary = client.xpending(shard.stream, shard.group)
    return sum(int(c["pending"]) for c in summary["consumers"] if c["name"] == consumer)


def _serves_every_shard(client: RedisClient, worker: WorkerProcess, shards: list[StreamKeys]):
    return all(worker.lease_alive(client, shard) for shard in shards) and len(
        worker.events("started")
    ) == len(shards)


def test_workers_serve_every_shard_and_recover_a_killed_workers_messages_on_each(
    sharded_stream: StreamSpec,
    redis_cluster: RedisClusterProcess,
    cluster_settings: Settings,
    cluster_client: RedisClient,
    start_worker: StartWorker,
    cluster_env: dict[str, str],
) -> None:
    shards = list(keys_of_shards(cluster_client, cluster_settings, sharded_stream))
    masters = {redis_cluster.port_for_key(shard.stream) for shard in shards}
    assert len(masters) == len(shards) == 3  # a shard per master (CLUSTER SHARDS)
    routed: list[list[dict[str, str]]] = [[] for _ in shards]
    for key in KEYS:
        routed[shard_of(key, len(shards))].append({"key": key, "sleep_ms": "60"})
    port = free_port()
    doomed = start_worker("sharded", env=ENV, args=["--concurrency", "3"])
    survivor = start_worker("sharded", env=ENV, args=["--metrics-port", str(port)])
    for worker in (doomed, survivor):
        wait_until(lambda w=worker: _serves_every_shard(cluster_client, w, shards), 60)

    for shard, messages in zip(shards, routed, strict=True):
        publish(cluster_client, shard, messages)
    publish(cluster_client, shards[1], [ROUTED_INVALID])  # a routing producer's bad entry
    base = keys_for(cluster_settings, sharded_stream)
    publish(cluster_client, base, [*({"key": k} for k in BASE_KEYS), INVALID])
    for key in BASE_KEYS:
        routed[shard_of(key, len(shards))].append({"key": key})
    # killed while it holds messages of every shard: the survivor must take them over
    wait_until(lambda: all(_pending_on(cluster_client, s, doomed.name) for s in shards), 60, 0.005)
    doomed.kill()

    # an entry the killed worker added to its shard but had not acknowledged on the base
    # key is forwarded again once idle (FORWARD_IDLE_MS): a copy, which its shard absorbs
    wait_until(lambda: cluster_client.xlen(base.stream) == 0, FORWARD_IDLE_MS / 1000 + 30)
    for shard, messages in zip(shards, routed, strict=True):
        expected = sorted(m["key"] for m in messages)
        wait_until(lambda s=shard, e=expected: _settled(cluster_client, s) == e, 90)
        assert redis_cluster.port_for_key(shard.results) == redis_cluster.port_for_key(shard.stream)
    wait_until(lambda: cluster_client.get(base.lag) == "0", 30)  # the stream's one lag
    dlqs = [base.dlq, *(s.dlq for s in shards)]
    dead = [DeadLetter.from_fields(f) for q in dlqs for _id, f in cluster_client.xrange(q)]
    # once each, with its payload: the base key's on the base DLQ, the shard's on its own
    assert [(d.stream, d.original_fields) for d in dead] == [
        (base.stream, INVALID),
        (shards[1].stream, ROUTED_INVALID),
    ]
    listed = run_sentinel({**cluster_env, **ENV}, "dlq", "list", "--json")
    assert sorted(e["payload"]["key"] for e in json.loads(listed.out)) == ["bad", "bad-too"]
    recovered = [e for e in survivor.events("recovered") if e["claimed_from"] == doomed.name]
    assert recovered, survivor.tail(40)  # (a call may end between the check and the kill)
    assert {e["stream"] for e in recovered} <= {s.stream for s in shards}

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=10) as response:
        text = response.read().decode()
    for shard in range(len(shards)):
        assert f'shard="{shard}"' in text and "sentinel_worker_processed_total{" in text
    assert text.count("# TYPE process_cpu_seconds_total") == 1  # one process, once

    assert survivor.stop(30) == 0
    assert not any(survivor.lease_alive(cluster_client, shard) for shard in shards)


def test_a_shard_count_other_than_the_recorded_one_is_refused_at_start_up(
    sharded_stream: StreamSpec,
    cluster_settings: Settings,
    cluster_client: RedisClient,
    start_worker: StartWorker,
) -> None:
    recorded_tags(cluster_client, sharded_stream.stream_key(cluster_settings), 2)
    worker = start_worker("sharded", env=ENV)
    wait_until(lambda: not worker.alive(), 60)
    assert worker.proc.returncode == EXIT_USAGE
    assert record_key("sharded") in worker.text() and "2 shard(s)" in worker.text()
