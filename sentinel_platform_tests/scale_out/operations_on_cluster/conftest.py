"""Point the operations suite's fixtures (sensors, checks, alerts) at the Redis Cluster.

Overriding ``make_settings`` re-points the shared ``settings``, ``redis_client`` and
everything built on them (see :mod:`sentinel_platform_tests.harness.suite_on_cluster`).
"""

from __future__ import annotations

from sentinel_platform_tests.harness.suite_on_cluster import make_settings

__all__ = ["make_settings"]
