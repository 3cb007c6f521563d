"""A sharded stream declared in one place, through the Dagster code location on a real
3-primary Redis Cluster: the platform's own location merges its publish asset and job
(``sentinel_platform_tests.sharded_assets``), the job's Spark executors send each row to
its id's shard (the asset's metadata counts each shard's rows), ``sentinel up`` starts the
stream's worker from the registry and it serves every shard, and the location's lag
sensor observes one stream: its lag, its shards' lags in the metadata, and the entries
processed on all of them."""

from __future__ import annotations

import importlib
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from sentinel_platform.domains.operations.lag_gate import SENSOR_NAME
from sentinel_platform.registry import StreamSpec
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, keys_for
from sentinel_platform.streams.sharding.routing import shard_of
from sentinel_platform.streams.sharding.shards import keys_of_shards
from sentinel_platform_tests.harness.fixtures.services import SHARDED_MODULE
from sentinel_platform_tests.harness.processes import FAST_TIMINGS
from sentinel_platform_tests.harness.sentinel_up import SENTINEL
from sentinel_platform_tests.harness.waits import wait_until

pytestmark = [pytest.mark.cluster, pytest.mark.slow]

ROWS = 300
ASSET = dg.AssetKey("sharded_stream")


@pytest.fixture
def sentinel_up(cluster_env: dict[str, str], tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """``sentinel up`` with one worker of the sharded stream and none of the built-in
    streams', on the cluster; SIGTERM at teardown must stop it cleanly (exit 0)."""
    env = {**cluster_env, **FAST_TIMINGS, "SENTINEL_STREAM_MODULES": SHARDED_MODULE}
    argv = [str(SENTINEL), "up", "--no-dagster", "--sharded-workers", "1"]
    argv += ["--transaction-workers", "0", "--axiom-workers", "0"]
    log = tmp_path / "sentinel-up.log"
    with log.open("wb") as sink:
        process = subprocess.Popen(argv, env=env, stdout=sink, stderr=subprocess.STDOUT)
    try:
        yield process
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=60)
    assert code == 0, log.read_text(errors="replace")[-4000:]


@pytest.fixture
def location(
    sharded_stream: StreamSpec, cluster_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> Iterator[dg.Definitions]:
    """The platform's code location, built with the cluster's settings and the sharded
    stream's module named, as ``sentinel up`` builds it for its code server."""
    for name, value in {**cluster_env, "SENTINEL_STREAM_MODULES": SHARDED_MODULE}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("SENTINEL_SPARK_MASTER", "local[2]")
    module = importlib.import_module("sentinel_platform.definitions")
    yield module.build_definitions()


def _tick(defs: dg.Definitions, instance: dg.DagsterInstance) -> dict[str, Any]:
    """One tick of the location's lag sensor: the stream's one observation's metadata."""
    resources = {
        name: (defs.resources or {})[name] for name in ("settings", "alerts", "stream_inspector")
    }
    with dg.build_sensor_context(
        instance=instance, cursor=None, resources=resources, definitions=defs
    ) as context:
        tick = defs.resolve_sensor_def(SENSOR_NAME).evaluate_tick(context)
    observed = [
        {name: value.value for name, value in event.metadata.items()}
        for event in tick.asset_events
        if isinstance(event, dg.AssetObservation) and event.asset_key == ASSET
    ]
    assert len(observed) == 1, tick.asset_events
    return observed[0]


def _settled(client: RedisClient, shards: tuple[StreamKeys, ...]) -> bool:
    return sum(int(client.xlen(shard.results)) for shard in shards) >= ROWS


def test_a_sharded_stream_publishes_and_is_watched_as_one_stream(
    location: dg.Definitions,
    sharded_stream: StreamSpec,
    cluster_settings: Settings,
    cluster_client: RedisClient,
    sentinel_up: subprocess.Popen[bytes],
) -> None:
    shards = keys_of_shards(cluster_client, cluster_settings, sharded_stream)
    with dg.instance_for_test() as instance:
        result = location.resolve_job_def(sharded_stream.publish_job).execute_in_process(
            instance=instance,
            run_config={"ops": {"sharded_source": {"config": {"rows": ROWS}}}},
        )
        assert result.success
        (materialised,) = result.asset_materializations_for_node(ASSET.path[-1])
        metadata = {name: value.value for name, value in materialised.metadata.items()}
        lengths = [int(cluster_client.xlen(shard.stream)) for shard in shards]
        assert [metadata[f"shard_{k}_rows"] for k in range(3)] == lengths
        assert metadata["rows_published"] == sum(lengths) == ROWS and min(lengths) > 0
        assert cluster_client.xlen(keys_for(cluster_settings, sharded_stream).stream) == 0
        for k, shard in enumerate(shards):
            ids = [f["data"] for _id, f in cluster_client.xrange(shard.stream)]
            keys = {sharded_stream.wire_model.from_fields({"data": d}).natural_key for d in ids}
            assert {shard_of(key, 3) for key in keys} == {k}

        # the worker `sentinel up` started serves every shard: all of it gets done
        wait_until(lambda: _settled(cluster_client, shards), timeout_s=120, what="every verdict")
        wait_until(lambda: _tick(location, instance)["lag"] == 0, timeout_s=30, what="the lag at 0")
        done = _tick(location, instance)
        assert done["consumers_alive"] == 1 and done["zone"] == "nominal", done
        assert done["entries_processed"] == ROWS  # the shards' work, not the base key's
        assert [done[f"shard_{k}_lag"] for k in range(3)] == [0, 0, 0]
        assert sentinel_up.poll() is None
