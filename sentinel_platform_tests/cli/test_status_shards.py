"""A sharded stream in ``sentinel status`` (``cli.status_shards``): one stream, its
figures its shards' summed, its zone the worst shard's; the breakdown with ``--shards``
and in ``--json``. From a table of shard documents, then through the real command on a
real server with a stream of three shards."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sentinel_platform.cli.status import ZONE_ORDER
from sentinel_platform.cli.status_shards import merged, merged_consumers
from sentinel_platform.registry import StreamSpec
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.sharding.shards import keys_of_shards
from sentinel_platform_tests.harness.cli import run_sentinel
from sentinel_platform_tests.harness.fixtures.services import SHARDED_MODULE
from sentinel_platform_tests.harness.streams import publish


def _doc(zone: str, lag: int, work_s: float | None, consumers: list[dict[str, Any]]) -> dict:
    return {
        "stream": f"s{lag}",
        "zone": zone,
        "lag": lag,
        "backlog": lag,
        "pending": 0,
        "live_workers": sum(c["lease"] == "alive" for c in consumers),
        "work_s": work_s,
        "dlq_depth": 1,
        "processed": 10,
        "rate_per_s": None,
        "drain_rate_per_s": 2.0,
        "in_flight_allowance": 4,
        "consumers": consumers,
        "retained": None,
    }


def _consumer(name: str, lease: str = "alive", pending: int = 1) -> dict[str, Any]:
    return {"name": name, "lease": lease, "pending": pending, "idle_ms": 5, "registered": None}


@pytest.mark.parametrize(
    ("zones", "works", "zone", "work"),
    [
        (["nominal", "nominal", "nominal"], [0.5, 0.2, None], "nominal", 0.5),
        (["nominal", "backpressure", "nominal"], [0.1, 12.0, 0.1], "backpressure", 12.0),
        (["elevated", "nominal", "worker_off"], [None, None, None], "worker_off", None),
    ],
)
def test_the_stream_is_its_shards_summed_and_its_worst_shard(
    zones: list[str], works: list[float | None], zone: str, work: float | None
) -> None:
    shards = [
        _doc(z, 10 * (k + 1), w, [_consumer("w1")])
        for k, (z, w) in enumerate(zip(zones, works, strict=True))
    ]
    base = {**_doc("nominal", 5, None, []), "stream": "s", "pending": 2}
    doc = merged(base, shards, ZONE_ORDER)
    assert (doc["stream"], doc["zone"], doc["work_s"]) == ("s", zone, work)
    assert (doc["lag"], doc["backlog"], doc["pending"]) == (65, 65, 2)  # the base's waiting too
    assert (doc["dlq_depth"], doc["processed"], doc["in_flight_allowance"]) == (3, 30, 12)
    assert doc["rate_per_s"] is None and doc["drain_rate_per_s"] == 6.0
    assert [s["stream"] for s in doc["shards"]] == ["s10", "s20", "s30"]


def test_a_consumer_is_alive_only_with_a_lease_on_every_shard() -> None:
    by_shard = [
        [_consumer("a"), _consumer("b")],
        [_consumer("a"), _consumer("b", "dead")],
        [_consumer("a", pending=3)],
    ]
    found = {c["name"]: c for c in merged_consumers(by_shard)}
    assert (found["a"]["lease"], found["a"]["pending"]) == ("alive", 5)
    assert (found["b"]["lease"], found["b"]["pending"]) == ("dead", 2)


def test_status_shows_a_sharded_stream_as_one_with_its_shards_on_request(
    sharded_stream: StreamSpec,
    settings: Settings,
    settings_env: dict[str, str],
    redis_client: RedisClient,
) -> None:
    shards = keys_of_shards(redis_client, settings, sharded_stream)
    for k, shard in enumerate(shards):
        publish(redis_client, shard, [{"key": f"k{k}-{n}"} for n in range(k + 1)])
        for n in range(k + 1):  # provisional verdicts in each shard's re-screen queue
            redis_client.xadd(shard.rescreen, {"key": f"k{k}-{n}", "sentinel_cause": "down"})
    env = {**settings_env, "SENTINEL_STREAM_MODULES": SHARDED_MODULE}

    shown = run_sentinel(env, "status", "--json")
    [doc] = [s for s in json.loads(shown.out)["streams"] if s["name"] == "sharded"]
    assert (doc["stream"], doc["lag"], doc["backlog"]) == ("sharded", 6, 6)
    assert doc["provisional"]["waiting"] == 6  # the shards' queues summed
    assert [(s["stream"], s["lag"]) for s in doc["shards"]] == [
        (shard.stream, k + 1) for k, shard in enumerate(shards)
    ]
    text = run_sentinel(env, "status", "--shards").out
    assert "sharded  (group sharded-workers)" in text and "3 shards" in text
    for k, shard in enumerate(shards):
        assert f"shard {k} {shard.stream}" in text and f"lag {k + 1} = backlog {k + 1}" in text
    assert "shard 0" not in run_sentinel(env, "status").out
