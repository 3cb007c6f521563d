"""A sharded stream's batch lane on a real 3-primary Redis Cluster: real worker processes
(``python -m workers.watch_transactions`` on the three-shard stream, its domain
processor speaking OpenAI's API) against a real HTTP server speaking OpenAI's Batch API.

The publish path puts a backfilled partition's messages in each shard's own batch lane
(``batch_stream_key`` of the shard's keys, in the shard's hash slot), so each shard's
lane must be served: every message is decided exactly once, through a batch, with
``lane=batch``, in its shard's results, and each shard's ledger and pending entries are
settled afterwards. Two workers serve the stream; neither submits a batch twice.
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
    env = lane_env(batch_api_server)
    workers = [start_worker("sharded", processor=None, env=env) for _ in range(2)]
    for worker in workers:
        waited(lambda w=worker: len(w.events("started")) == len(shards), workers, "started")
    expected: list[list[str]] = []
    for number, shard in enumerate(shards):
        ids = [f"past-{number}-{n}" for n in range(PER_SHARD)]
        lane = batch_stream_key(shard)
        assert redis_cluster.port_for_key(lane) == redis_cluster.port_for_key(shard.stream)
        for n, txn_id in enumerate(ids):
            txn = Transaction(**{**BASE, "id": txn_id, "amount": 100.0 + n})
            cluster_client.xadd(lane, cast(dict[Any, Any], txn.to_fields()))
        expected.append(ids)

    for shard, ids in zip(shards, expected, strict=True):
        done = lambda s=shard: len(batch_verdicts(cluster_client, s)) >= PER_SHARD  # noqa: E731
        waited(done, workers, f"the batch verdicts of {shard.stream}")
        waited(lambda s=shard: settled(cluster_client, s), workers, f"{shard.stream} settled")
        found = batch_verdicts(cluster_client, shard)
        counts = Counter(v["txn_id"] for v in found)
        assert sorted(counts) == sorted(ids) and set(counts.values()) == {1}, counts
        assert {v["driver_used"] for v in found} == {"analyzer"}
        assert all(v["model"] and v["input_tokens"] for v in found)
    assert batch_api_server.realtime_calls() == 0  # nothing of the lane went real time
    assert len(shards) <= batch_api_server.submissions() <= len(shards) * PER_SHARD
    for worker in workers:
        started = worker.events("batch_lane_started")
        assert {e["mode"] for e in started} == {"batch"}, worker.tail(20)
        assert KEY not in worker.text()
