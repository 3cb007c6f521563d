"""Point the operations suite's fixtures (sensors, checks, alerts) at the Redis Cluster."""

from __future__ import annotations

from sentinel_platform_tests.domains.operations.conftest import (
    clock,
    make_resources,
    ops_overrides,
    txn_group,
    webhook_factory,
)
from sentinel_platform_tests.scale_out.suite_on_cluster import make_settings

__all__ = [
    "clock",
    "make_resources",
    "make_settings",
    "ops_overrides",
    "txn_group",
    "webhook_factory",
]
