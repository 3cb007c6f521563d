"""Re-pointing another area's test suite at the Redis Cluster, without copying its tests.

Import :func:`make_settings` into a folder's conftest.py and the root ``settings``,
``redis_client`` (which FLUSHALLs every primary) and ``settings_env`` fixtures, and
everything built on them, talk to the cluster with ``REDIS_URL=redis+cluster://...``.
Test functions imported from the other area then run unchanged against the cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sentinel_platform.settings import Settings, load_settings
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
