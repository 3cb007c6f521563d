"""Point the operations suite's fixtures (sensors, checks, alerts) at the Redis Cluster."""

from __future__ import annotations

from sentinel_platform_tests.scale_out.suite_on_cluster import make_settings
from sentinel_platform_tests.sensors.conftest import (
    clock,
    make_resources,
    ops_overrides,
    txn_group,
    webhook_factory,
)

__all__ = [
    "clock",
    "make_resources",
    "make_settings",
    "ops_overrides",
    "txn_group",
    "webhook_factory",
]
