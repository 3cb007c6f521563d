"""A sharded stream's batch lane on a real 3-primary Redis Cluster: real worker processes
(``python -m workers.watch_transactions`` on the three-shard stream, its domain
processor speaking OpenAI's API) against a real HTTP server speaking OpenAI's Batch API.

The publish path puts a backfilled partition's messages in each shard's own batch lane
(``batch_stream_key`` of the shard's keys, in the shard's hash slot), so each shard's
lane must be served: every message is decided exactly once, through a batch, with
``lane=batch``, in its shard's results, and each shard's ledger and pending entries are
settled afterwards. Two workers serve the stream; neither submits a batch twice, also
when the worker holding the lanes is SIGKILLed while their batches are at the provider.
"""

from __future__ import annotations

from collections import Counter
from typing import Any, cast

import pytest

from sentinel_platform.registry import StreamSpec
from sentinel_platform.schemas import Transaction
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, batch_stream_key, batches_key
from sentinel_platform.streams.sharding.shards import keys_of_shards
from sentinel_platform_tests.harness.batch_api_server import BatchApiServer
from sentinel_platform_tests.harness.fixtures.services import SHARDED_MODULE
from sentinel_platform_tests.harness.processes import MODEL_NAMES, StartWorker, WorkerProcess
from sentinel_platform_tests.harness.redis_cluster import RedisClusterProcess
from sentinel_platform_tests.harness.suite_on_cluster import worker_env  # noqa: F401 (workers on the cluster)
from sentinel_platform_tests.harness.waits import WaitTimeout, wait_until
from sentinel_platform_tests.workers.processors.test_transactions import BASE

pytestmark = pytest.mark.cluster

KEY = "sk-Sh4rd-B4tch-L4ne-K3y-0123456789"
PER_SHARD = 6


def lane_env(server: BatchApiServer) -> dict[str, str]:
    """The sharded stream's workers, their domain processor speaking OpenAI's API at
    ``server`` (real time and batch), the lane's polls a fraction of a second apart."""
    return {
        "SENTINEL_STREAM_MODULES": SHARDED_MODULE,
        "SENTINEL_ANALYZER_API": "openai",
        "SENTINEL_ANALYZER_URL": f"{server.url}/v1",
        "SENTINEL_ANALYZER_API_KEY": KEY,
        "SENTINEL_ANALYZER_MODEL": MODEL_NAMES["openai"],
        "SENTINEL_ANALYZER_MAX_OUTPUT_TOKENS": "100",
        "SENTINEL_ANALYZER_BATCH_LANE": "on",  # the stub stands in for the provider's host
        "SENTINEL_ANALYZER_BATCH_POLL_S": "0.1",
        "SENTINEL_ANALYZER_BATCH_POLL_MAX_S": "0.3",
        "SENTINEL_ANALYZER_BATCH_GATHER_S": "0.3",
    }


def batch_verdicts(client: RedisClient, shard: StreamKeys) -> list[dict[str, str]]:
    rows = cast(list[Any], client.xrange(shard.results))
    return [dict(fields) for _id, fields in rows if fields.get("lane") == "batch"]


def settled(client: RedisClient, shard: StreamKeys) -> bool:
    """The shard's ledger is empty and nothing of its batch lane is pending."""
    pending = int(client.xpending(batch_stream_key(shard), shard.group)["pending"])
    return client.zcard(batches_key(shard)) == 0 and pending == 0


def waited(condition: Any, workers: list[WorkerProcess], what: str) -> None:
    try:
        wait_until(condition, timeout_s=60, what=what)
    except WaitTimeout as exc:
        tails = "\n".join(worker.tail(15) for worker in workers)
        raise AssertionError(f"{exc}\n{tails}") from None


def publish_past(
    client: RedisClient, redis_cluster: RedisClusterProcess, shards: list[StreamKeys]
) -> list[list[str]]:
    """:data:`PER_SHARD` transactions in each shard's batch lane (its hash slot's); their
    ids per shard."""
    expected: list[list[str]] = []
    for number, shard in enumerate(shards):
        ids = [f"past-{number}-{n}" for n in range(PER_SHARD)]
        lane = batch_stream_key(shard)
        assert redis_cluster.port_for_key(lane) == redis_cluster.port_for_key(shard.stream)
        for n, txn_id in enumerate(ids):
            txn = Transaction(**{**BASE, "id": txn_id, "amount": 100.0 + n})
            client.xadd(lane, cast(dict[Any, Any], txn.to_fields()))
        expected.append(ids)
    return expected


def decided_once(
    client: RedisClient,
    shards: list[StreamKeys],
    expected: list[list[str]],
    workers: list[WorkerProcess],
) -> None:
    """Each shard's messages decided once by the model through a batch, its lane settled."""
    for shard, ids in zip(shards, expected, strict=True):
        done = lambda s=shard: len(batch_verdicts(client, s)) >= PER_SHARD  # noqa: E731
        waited(done, workers, f"the batch verdicts of {shard.stream}")
        waited(lambda s=shard: settled(client, s), workers, f"{shard.stream} settled")
        found = batch_verdicts(client, shard)
        counts = Counter(v["txn_id"] for v in found)
        assert sorted(counts) == sorted(ids) and set(counts.values()) == {1}, counts
        assert {v["driver_used"] for v in found} == {"analyzer"}
        assert all(v["model"] and v["input_tokens"] for v in found)


def serving(
    start_worker: StartWorker, server: BatchApiServer, shards: list[StreamKeys]
) -> list[WorkerProcess]:
    """Two workers of the sharded stream, each serving every shard."""
    workers = [start_worker("sharded", processor=None, env=lane_env(server)) for _ in range(2)]
    for worker in workers:
        waited(lambda w=worker: len(w.events("started")) == len(shards), workers, "started")
    return workers


def test_each_shards_batch_lane_is_decided_once_through_the_batch_api(
    sharded_stream: StreamSpec,
    redis_cluster: RedisClusterProcess,
    cluster_settings: Settings,
    cluster_client: RedisClient,
    start_worker: StartWorker,
    batch_api_server: BatchApiServer,
) -> None:
    shards = list(keys_of_shards(cluster_client, cluster_settings, sharded_stream))
    assert len({redis_cluster.port_for_key(shard.stream) for shard in shards}) == 3
    workers = serving(start_worker, batch_api_server, shards)
    expected = publish_past(cluster_client, redis_cluster, shards)
    decided_once(cluster_client, shards, expected, workers)
    assert batch_api_server.realtime_calls() == 0  # nothing of the lane went real time
    assert len(shards) <= batch_api_server.submissions() <= len(shards) * PER_SHARD
    for worker in workers:
        started = worker.events("batch_lane_started")
        assert {e["stream"] for e in started} == {batch_stream_key(s) for s in shards}
        assert {e["mode"] for e in started} == {"batch"}, worker.tail(20)
        assert KEY not in worker.text()


def test_a_killed_lane_holders_batches_are_resumed_on_every_shard_without_a_second_submission(
    sharded_stream: StreamSpec,
    redis_cluster: RedisClusterProcess,
    cluster_settings: Settings,
    cluster_client: RedisClient,
    start_worker: StartWorker,
    batch_api_server: BatchApiServer,
) -> None:
    batch_api_server.polls_to_end = 10**6  # at the provider until the test lets it end
    shards = list(keys_of_shards(cluster_client, cluster_settings, sharded_stream))
    workers = serving(start_worker, batch_api_server, shards)
    expected = publish_past(cluster_client, redis_cluster, shards)

    def polled_at_provider(shard: StreamKeys) -> bool:
        index = batches_key(shard)
        local_ids = cast(list[str], cluster_client.zrange(index, 0, -1))
        return len(local_ids) == 1 and bool(
            cluster_client.hget(f"{index}:{local_ids[0]}", "provider_status")
        )

    at_provider = lambda: all(polled_at_provider(s) for s in shards)  # noqa: E731
    waited(at_provider, workers, "a batch of each shard polled at the provider")
    assert batch_api_server.submissions() == len(shards)
    holds = [len(worker.events("batch_lane_holding")) for worker in workers]
    doomed, survivor = (workers[0], workers[1]) if holds[0] >= holds[1] else workers[::-1]
    assert doomed.events("batch_lane_holding"), "the killed worker holds a lane"
    doomed.kill()
    batch_api_server.polls_to_end = 0
    decided_once(cluster_client, shards, expected, [survivor])
    assert batch_api_server.submissions() == len(shards), "no batch submitted twice"
    assert batch_api_server.realtime_calls() == 0
