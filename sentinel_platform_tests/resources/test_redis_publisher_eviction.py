"""The publisher refuses to publish to a server that may evict any key (the streams, with
their unprocessed entries), unless the setting accepts the risk."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sentinel_platform.resources.redis_publisher import PublishError, RedisPublisherResource
from sentinel_platform.resources.settings import SettingsResource
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.eviction_policy import ALLOW_SETTING


def _publisher(settings: Settings, **overrides: str) -> RedisPublisherResource:
    values = {"redis_url": settings.redis_url_value, "home": str(settings.home_dir), **overrides}
    return RedisPublisherResource(settings=SettingsResource(overrides=values))


def test_publisher_refuses_a_server_evicting_any_key(
    settings: Settings, redis_client: RedisClient, eviction_policy: Callable[[str], None]
) -> None:
    eviction_policy("allkeys-lru")

    with pytest.raises(PublishError) as refused:
        _publisher(settings).publish_client("transactions")

    for name in ("transactions", "maxmemory-policy", "allkeys-lru", ALLOW_SETTING):
        assert name in str(refused.value)


@pytest.mark.parametrize(
    ("policy", "overrides"),
    [
        ("noeviction", {}),
        ("volatile-lru", {}),
        ("allkeys-lru", {"allow_evicting_server": "true"}),
    ],
)
def test_publisher_publishes_to_a_server_it_accepts(
    settings: Settings,
    redis_client: RedisClient,
    eviction_policy: Callable[[str], None],
    policy: str,
    overrides: dict[str, str],
) -> None:
    eviction_policy(policy)

    with _publisher(settings, **overrides).publish_client("transactions") as client:
        assert client.ping()
