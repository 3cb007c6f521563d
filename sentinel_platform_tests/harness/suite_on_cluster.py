"""Re-pointing tests at the Redis Cluster, without copying them.

Import :func:`make_settings` into a test module and the shared ``settings``,
``redis_client`` (which FLUSHALLs every primary) and ``settings_env`` fixtures, and
everything built on them, talk to the cluster with ``REDIS_URL=redis+cluster://...`` for
that module's tests. Test functions imported from another module then run unchanged
against the cluster. Import :func:`worker_env` instead to keep the session's server and run
only the module's worker processes (``start_worker``) on the cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sentinel_platform.settings import Settings, load_settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform_tests.harness.processes import FAST_TIMINGS
from sentinel_platform_tests.harness.redis_cluster import RedisClusterProcess


@pytest.fixture
def make_settings(
    redis_cluster: RedisClusterProcess, sentinel_home: Path
) -> Callable[..., Settings]:
    """Settings pointing at the Redis Cluster; keyword overrides use field names."""

    def factory(**overrides: Any) -> Settings:
        values: dict[str, Any] = {"redis_url": redis_cluster.url, "home": sentinel_home}
        values.update(overrides)
        settings = load_settings(**values)
        assert settings.is_cluster
        return settings

    return factory


@pytest.fixture
def worker_env(cluster_env: dict[str, str], cluster_client: RedisClient) -> dict[str, str]:
    """Worker environment on the (flushed) cluster, with the workers suite's short timings."""
    return {**cluster_env, **FAST_TIMINGS}
