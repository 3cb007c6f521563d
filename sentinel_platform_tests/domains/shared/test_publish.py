"""A new daily stream writes only its own asset: its publish asset and job come from its spec."""

from __future__ import annotations

import dataclasses

import dagster as dg

from sentinel_platform.domains.operations.stream_health import (
    EVICTION_CHECK,
    LAG_CHECK,
    build_stream_health_checks,
)
from sentinel_platform.domains.operations.targets import StreamTarget
from sentinel_platform.domains.shared.common import DAILY
from sentinel_platform.domains.shared.publish import daily_publishing
from sentinel_platform.registry import AXIOMS
from sentinel_platform.resources.redis_publisher import RedisPublisherResource
from sentinel_platform.resources.settings import SettingsResource
from sentinel_platform.resources.stream_inspector import StreamInspector

#: Declared here only, never registered: the factory reads nothing but the spec.
ORDERS = dataclasses.replace(
    AXIOMS, name="orders", asset="order_stream", publish_job="publish_orders"
)


@dg.asset(group_name=ORDERS.name, partitions_def=DAILY)
def orders() -> None:
    """The stream's own transformation (its body does not matter here)."""


def test_the_publish_asset_and_job_are_named_grouped_and_pooled_by_the_spec() -> None:
    asset, job = daily_publishing(
        ORDERS, orders, description="Orders on stream `orders`.", job_description="A day."
    )
    health = build_stream_health_checks([StreamTarget(ORDERS)])
    settings = SettingsResource()
    location = dg.Definitions(
        assets=[orders, asset],
        asset_checks=health,
        jobs=[job],
        resources={  # built, never used: nothing runs here
            "settings": settings,
            "redis_publisher": RedisPublisherResource(settings=settings),
            "stream_inspector": StreamInspector(),
        },
    )

    node = location.resolve_asset_graph().get(dg.AssetKey("order_stream"))
    assert (node.group_name, node.pools, node.description) == (
        "orders",
        {"sentinel/publish/orders"},
        "Orders on stream `orders`.",
    )
    assert node.partitions_def == DAILY
    assert node.parent_keys == {dg.AssetKey("orders")}

    resolved = location.resolve_job_def("publish_orders")
    assert (resolved.description, resolved.partitions_def) == ("A day.", DAILY)
    assert resolved.asset_layer.executable_asset_keys == {
        dg.AssetKey("orders"),
        dg.AssetKey("order_stream"),
    }
    checks = {key.name for key in resolved.asset_layer.asset_graph.asset_check_keys}
    assert EVICTION_CHECK in checks and LAG_CHECK not in checks
