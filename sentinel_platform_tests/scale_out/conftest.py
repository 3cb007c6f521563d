"""Fixtures for the scale-out tests: a real Redis Cluster and a real Spark standalone cluster.

Both are session-scoped because they are expensive (three redis-servers; two JVM
daemons) and stateless between tests once flushed. A missing binary skips with a loud
reason; with ``REQUIRE_CLUSTER_TESTS=1`` (the CI cluster step) it fails instead, so
the step can never pass by skipping everything.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from sentinel_platform.redis_server import RedisServerError
from sentinel_platform.settings import Settings, load_settings
from sentinel_platform.streams.plumbing.connection import RedisClient, connect
from sentinel_platform_tests.harness.processes import FAST_TIMINGS
from sentinel_platform_tests.scale_out.redis_cluster import (
    ClusterStartError,
    RedisClusterProcess,
    find_cluster_binaries,
)
from sentinel_platform_tests.scale_out.requirements import missing
from sentinel_platform_tests.scale_out.spark_standalone import (
    SparkClusterError,
    SparkStandaloneCluster,
    find_java,
)
from sentinel_platform_tests.workers.conftest import start_worker

# Spark's Python workers must run this venv's interpreter (it has redis and the
# platform installed); without it pyspark starts a bare ``python3`` on the executors.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)


@pytest.fixture(scope="session")
def redis_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisClusterProcess]:
    """Three primaries, slots split evenly by ``redis-cli --cluster create``."""
    found = find_cluster_binaries()
    if isinstance(found, str):
        missing(found)
    assert not isinstance(found, str)
    server, cli = found
    work_dir = tmp_path_factory.mktemp("redis-cluster")
    try:
        cluster = RedisClusterProcess(server, cli, work_dir / "first").start()
    except (ClusterStartError, RedisServerError):  # a picked free port was taken meanwhile
        cluster = RedisClusterProcess(server, cli, work_dir / "second").start()
    try:
        yield cluster
    finally:
        cluster.stop()


@pytest.fixture
def make_cluster_settings(
    redis_cluster: RedisClusterProcess, sentinel_home: Path
) -> Callable[..., Settings]:
    """Settings pointing at the Redis Cluster; keyword overrides use field names."""

    def factory(**overrides: Any) -> Settings:
        values: dict[str, Any] = {"redis_url": redis_cluster.url, "home": sentinel_home}
        values.update(overrides)
        return load_settings(**values)

    return factory


@pytest.fixture
def cluster_settings(make_cluster_settings: Callable[..., Settings]) -> Settings:
    return make_cluster_settings()


@pytest.fixture
def cluster_client(
    redis_cluster: RedisClusterProcess, cluster_settings: Settings
) -> Iterator[RedisClient]:
    """The platform's own cluster client, on an emptied cluster."""
    redis_cluster.flushall()
    client = connect(cluster_settings)
    yield client
    client.close()


@pytest.fixture
def cluster_env(cluster_settings: Settings) -> dict[str, str]:
    """Environment for child processes (workers, Dagster, Spark drivers) on the cluster."""
    return {
        **os.environ,
        "REDIS_URL": cluster_settings.redis_url_value,
        "SENTINEL_HOME": str(cluster_settings.home_dir),
        "PYTHONUNBUFFERED": "1",
    }


def _start_spark(work_dir: Path) -> SparkStandaloneCluster:
    """Start the cluster; once more on fresh ports if a free port was taken in between."""
    try:
        return SparkStandaloneCluster(work_dir / "first").start()
    except SparkClusterError:
        return SparkStandaloneCluster(work_dir / "second").start()


@pytest.fixture(scope="session")
def spark_standalone(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[SparkStandaloneCluster]:
    """A Master and one Worker (1 core, 1 GB for executors) from the pyspark install."""
    if find_java() is None:
        missing("java not found (JAVA_HOME or PATH) - the Spark standalone tests need Java 17+")
    if importlib.util.find_spec("pyspark") is None:
        missing("pyspark is not installed - the Spark standalone tests run its bin/spark-class")
    cluster = _start_spark(tmp_path_factory.mktemp("spark-standalone"))
    try:
        yield cluster
    finally:
        cluster.stop()


# --- real worker processes on the Redis Cluster -------------------------------------------
# The workers suite's ``start_worker`` (imported above), re-pointed at the cluster by
# overriding ``worker_env``: pytest resolves a fixture's dependencies by name from the
# requesting test's folder.


@pytest.fixture
def worker_env(cluster_env: dict[str, str], cluster_client: RedisClient) -> dict[str, str]:
    """Worker environment on the (flushed) cluster, with the workers suite's short timings."""
    return {**cluster_env, **FAST_TIMINGS}


__all__ = ["start_worker"]
