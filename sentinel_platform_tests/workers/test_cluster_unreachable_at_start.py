"""A worker started while its Redis Cluster is unreachable waits for it instead of dying.

Like a single server that is down at start-up, an unreachable cluster seed is an outage:
the real worker process logs ``redis_unavailable`` and retries with backoff, and once a
real cluster comes up behind the seed address it joins it and consumes.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from sentinel_platform.redis_server import free_port
from sentinel_platform.settings import load_settings
from sentinel_platform.streams.plumbing.connection import connect
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.harness.processes import (
    FAST_TIMINGS,
    NOOP_PROCESSOR,
    WorkerProcess,
    launch_worker,
)
from sentinel_platform_tests.harness.redis_cluster import (
    RedisClusterProcess,
    find_cluster_binaries,
)
from sentinel_platform_tests.harness.requirements import missing
from sentinel_platform_tests.harness.streams import publish
from sentinel_platform_tests.harness.waits import wait_until

pytestmark = pytest.mark.cluster


class ClusterOnSeedPort(RedisClusterProcess):
    """A cluster whose first node (the seed) listens on a port chosen beforehand."""

    def __init__(self, server: str, cli: str, data_dir: Path, seed_port: int) -> None:
        super().__init__(server, cli, data_dir)
        self._ports = iter([seed_port])

    def _pick_port(self) -> int:
        return next(self._ports, None) or super()._pick_port()


def retries_seen(worker: WorkerProcess, count: int) -> bool:
    """``count`` retried outages logged; fails at once if the worker has exited."""
    if worker.proc.poll() is not None:
        raise AssertionError(f"worker exited with {worker.proc.returncode}:\n{worker.text()}")
    return len(worker.events("redis_unavailable")) >= count


@pytest.fixture
def seed_port() -> int:
    return free_port()


@pytest.fixture
def late_cluster(tmp_path: Path, seed_port: int) -> Iterator[ClusterOnSeedPort]:
    """A cluster not started yet; the test starts it, teardown stops it."""
    found = find_cluster_binaries()
    if isinstance(found, str):
        missing(found)  # skips, or fails under REQUIRE_CLUSTER_TESTS=1
    assert not isinstance(found, str)
    cluster = ClusterOnSeedPort(*found, tmp_path / "late-cluster", seed_port)
    yield cluster
    cluster.stop()


def test_worker_retries_an_unreachable_cluster_and_joins_it_when_it_comes_up(
    late_cluster: ClusterOnSeedPort, seed_port: int, tmp_path: Path
) -> None:
    url = f"redis+cluster://127.0.0.1:{seed_port}/0"
    env = {
        **os.environ,
        **FAST_TIMINGS,
        "REDIS_URL": url,
        "SENTINEL_HOME": str(tmp_path / "home"),
        "PYTHONUNBUFFERED": "1",
    }
    # The no-op processor touches no Redis itself, so only the worker's connect is tested.
    worker = launch_worker(env, tmp_path, processor=NOOP_PROCESSOR)
    try:
        wait_until(lambda: retries_seen(worker, 2), 30)
        assert "cannot reach Redis" in worker.events("redis_unavailable")[0]["error"]
        assert "Traceback" not in worker.text()

        late_cluster.start()
        settings = load_settings(redis_url=url, home=tmp_path / "home")
        keys = transaction_keys(settings)
        with connect(settings) as client:
            worker.wait_ready(client, 60)
            publish(client, keys, [{"key": f"late{n}"} for n in range(5)])
            done = {f"late{n}" for n in range(5)}
            wait_until(
                lambda: done <= {fields["key"] for _id, fields in client.xrange(keys.results)},
                30,
            )
        worker.terminate()
        assert worker.wait(15) == 0
    finally:
        worker.kill()
