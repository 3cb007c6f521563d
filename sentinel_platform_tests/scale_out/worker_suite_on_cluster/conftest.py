"""Point the workers suite's own fixtures at the Redis Cluster.

Overriding ``make_settings`` is enough: the root ``settings``, ``redis_client`` (which
FLUSHALLs every primary) and ``settings_env`` derive from it, and the workers suite's
``worker_env``/``start_worker``/``tx_keys`` derive from those. The imported test bodies
are therefore exactly the workers suite's, with ``REDIS_URL=redis+cluster://...``.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from sentinel_platform.settings import Settings, load_settings
from sentinel_platform_tests.scale_out.redis_cluster import RedisClusterProcess
from sentinel_platform_tests.workers.conftest import (
    start_worker,
    tx_keys,
    worker_env,
)

__all__ = ["start_worker", "tx_keys", "worker_env"]


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
