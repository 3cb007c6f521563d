"""The publish assets run unchanged on a Spark standalone cluster, and its executors write.

The user's path, end to end: ``dagster asset materialize`` of both publish groups with
``SENTINEL_SPARK_MASTER=spark://...`` (the driver is that CLI process) and the executor
the code location uses in production (no execution config), real workers consuming the
streams, the data under a ``file://`` URI, and a relay in front of Redis that attributes
every connection to the process that opened it. Every Spark step reports the cluster's
master, an application the Master itself lists, and the UTC session time zone; every
XADD must come from a Python process under the Worker JVM's executor, none from the
driver, and every published row must arrive.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from sentinel_platform.redis_server import RedisServer
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import axiom_keys, transaction_keys
from sentinel_platform_tests.harness.attributing_proxy import AttributingProxy, Connection
from sentinel_platform_tests.harness.dagster_cli import last_run_records
from sentinel_platform_tests.harness.processes import StartWorker
from sentinel_platform_tests.harness.spark_standalone import SparkStandaloneCluster
from sentinel_platform_tests.harness.suite_on_cluster import worker_env  # noqa: F401 (workers on the cluster)
from sentinel_platform_tests.harness.waits import wait_until

#: A master, a worker, an executor and a driver (four JVMs) for one run: two minutes on a
#: quiet 2-core machine, five beside the rest of the suite; the run gets ten.
pytestmark = [pytest.mark.cluster, pytest.mark.slow, pytest.mark.timeout(900)]

DAY = "2026-11-20"
TRANSACTIONS = 600
RUN_TIMEOUT_S = 600
SPARK_STEPS = {
    "raw_transactions",
    "enriched_transactions",
    "enriched_transactions_transactions_quality",
    "transaction_stream",
    "telemetry_readings",
    "axioms",
    "axioms_axioms_quality",
    "axiom_stream",
}
EXECUTOR_CONF = ",".join(
    [
        "spark.executor.memory=512m",
        "spark.executor.cores=1",
        "spark.cores.max=1",
        "spark.driver.host=127.0.0.1",
        "spark.driver.bindAddress=127.0.0.1",
        "spark.driver.memory=512m",
        "spark.sql.shuffle.partitions=2",
    ]
)


@pytest.fixture
def proxy(redis_server: RedisServer) -> Iterator[AttributingProxy]:
    relay = AttributingProxy(redis_server.port).start()
    yield relay
    relay.stop()


def _run_config() -> dict[str, Any]:
    return {
        "ops": {
            "raw_transactions": {"config": {"rows": TRANSACTIONS, "spark_partitions": 2}},
            "telemetry_readings": {
                "config": {"sources": 4, "readings_per_source": 120, "spark_partitions": 2}
            },
        },
    }


def _materialize(
    spark_standalone: SparkStandaloneCluster, settings: Settings, redis_url: str, tmp: Path
) -> tuple[subprocess.CompletedProcess[str], int]:
    """Run the Dagster CLI as the Spark driver; returns its result and PID."""
    dagster_home = tmp / "dagster-home"
    dagster_home.mkdir()
    env = {
        **spark_standalone.env,
        "REDIS_URL": redis_url,
        "SENTINEL_HOME": str(settings.home_dir),
        "DAGSTER_HOME": str(dagster_home),
        "SENTINEL_SPARK_MASTER": spark_standalone.master_url,
        "SENTINEL_SPARK_CONF": EXECUTOR_CONF,
        "SENTINEL_DATA_DIR": (settings.home_dir / "shared-data").as_uri(),
        "SENTINEL_MAX_PAUSE_S": "120",
        # Backpressure is proven elsewhere; here it would only add waits on a busy CI box.
        "SENTINEL_LAG_WARN": "5000",
        "SENTINEL_LAG_PAUSE": "10000",
    }
    command = [
        str(Path(sys.executable).parent / "dagster"),
        *("asset", "materialize", "-m", "sentinel_platform.definitions"),
        *("--select", "group:transactions or group:axioms", "--partition", DAY),
        *("--config-json", json.dumps(_run_config())),
    ]
    with subprocess.Popen(
        command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    ) as driver:
        try:
            output, _ = driver.communicate(timeout=RUN_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            driver.kill()
            output, _ = driver.communicate()
        result = subprocess.CompletedProcess(command, driver.returncode, output, "")
    (tmp / "driver.log").write_text(output)
    return result, driver.pid


def _rows_published(dagster_home: Path, asset: str) -> int:
    with dg.DagsterInstance.from_config(str(dagster_home)) as instance:
        event = instance.get_latest_materialization_event(dg.AssetKey(asset))
        assert event is not None and event.asset_materialization is not None, asset
        return int(event.asset_materialization.metadata["rows_published"].value)


def _is_executor_python(connection: Connection, worker_jvm: int) -> bool:
    chain = [pid for pid, _ in connection.ancestry]
    if worker_jvm not in chain:
        return False
    below_worker = connection.ancestry[: chain.index(worker_jvm)]
    return any("CoarseGrainedExecutorBackend" in command for _, command in below_worker)


def test_publish_assets_run_on_standalone_executors_and_every_row_arrives(
    spark_standalone: SparkStandaloneCluster,
    settings: Settings,
    redis_client: RedisClient,
    redis_server: RedisServer,
    proxy: AttributingProxy,
    start_worker: StartWorker,
    tmp_path: Path,
) -> None:
    tx, ax = transaction_keys(settings), axiom_keys(settings)
    direct = {"REDIS_URL": redis_server.url, "SENTINEL_HOME": str(settings.home_dir)}
    for stream in ("transactions", "axioms"):  # live workers, straight to Redis (no relay)
        start_worker(stream, processor=None, env=direct).wait_ready(redis_client, 30)

    before = spark_standalone.application_ids()
    result, driver_pid = _materialize(
        spark_standalone, settings, f"redis://127.0.0.1:{proxy.port}/0", tmp_path
    )
    assert result.returncode == 0, result.stdout[-6000:] + spark_standalone.logs()
    new_apps = spark_standalone.application_ids() - before
    _assert_every_spark_step_ran_on(spark_standalone, tmp_path / "dagster-home", new_apps)

    published = {
        tx.stream: _rows_published(tmp_path / "dagster-home", "transaction_stream"),
        ax.stream: _rows_published(tmp_path / "dagster-home", "axiom_stream"),
    }
    assert published[tx.stream] == TRANSACTIONS
    assert published[ax.stream] > 0
    assert {s: redis_client.xlen(s) for s in published} == published

    writers = [c for c in proxy.connections if c.xadds]
    assert sum(c.xadds for c in writers) == sum(published.values()), proxy.connections
    for connection in writers:
        assert connection.pid is not None, connection
        assert connection.pid != driver_pid, connection
        assert driver_pid not in [pid for pid, _ in connection.ancestry], connection
        assert _is_executor_python(connection, spark_standalone.worker_pid), connection
    driver_side = [c for c in proxy.connections if driver_pid in [p for p, _ in c.ancestry]]
    driver_side += [c for c in proxy.connections if c.pid == driver_pid]
    assert driver_side, "the driver's own connections (stop key, checks) were attributed too"
    assert all(c.xadds == 0 for c in driver_side)

    # The workers consumed what the executors published.
    wait_until(lambda: redis_client.xlen(tx.results) == TRANSACTIONS, 60)
    wait_until(lambda: redis_client.xlen(ax.results) == published[ax.stream], 60)
    for asset in ("enriched_transactions", "axioms"):
        assert (settings.home_dir / "shared-data" / asset / DAY / "_SUCCESS").exists()


def _assert_every_spark_step_ran_on(
    cluster: SparkStandaloneCluster, dagster_home: Path, new_apps: set[str]
) -> None:
    """Each Spark step reports the cluster's master, a listed application, and UTC."""
    by_step: dict[str, list[dict[str, Any]]] = {}
    for record in last_run_records(dagster_home):
        by_step.setdefault(record.step, []).append(record.metadata)
    assert set(by_step) >= SPARK_STEPS, sorted(by_step)
    apps = set()
    for step in SPARK_STEPS:
        for metadata in by_step[step]:
            assert metadata["spark/master"] == cluster.master_url, (step, metadata)
            assert metadata["spark/session_time_zone"] == "UTC", (step, metadata)
            apps.add(metadata["spark/application_id"])
    assert apps and apps <= new_apps, (apps, new_apps)
    assert len(apps) == 1, apps  # the production executor: one session for the whole run
