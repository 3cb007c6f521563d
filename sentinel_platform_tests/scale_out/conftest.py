"""The scale-out tests' worker processes run on the Redis Cluster.

The shared ``start_worker`` fixture, re-pointed at the cluster by overriding ``worker_env``:
pytest resolves a fixture's dependencies by name from the requesting test's folder.
"""

from __future__ import annotations

import pytest

from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform_tests.harness.processes import FAST_TIMINGS


@pytest.fixture
def worker_env(cluster_env: dict[str, str], cluster_client: RedisClient) -> dict[str, str]:
    """Worker environment on the (flushed) cluster, with the workers suite's short timings."""
    return {**cluster_env, **FAST_TIMINGS}
