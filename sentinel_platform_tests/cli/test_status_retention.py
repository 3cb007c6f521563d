"""``sentinel status`` shows how much of each source stream is retained, and the policy."""

from __future__ import annotations

from collections.abc import Callable

from sentinel_platform.streams.backlog.retention import trim
from sentinel_platform.streams.consumer.group import ensure_group
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.streams import publish, read_and_ack


def _retained(cli: Callable, stream: str) -> dict:
    doc = cli("status", "--json").json()
    return next(s for s in doc["streams"] if s["stream"] == stream)["retained"]


def test_status_shows_the_retained_entries_before_and_after_a_trim(
    cli: Callable, redis_client: RedisClient, tx_keys: StreamKeys, make_settings
) -> None:
    client, keys = redis_client, tx_keys
    ensure_group(client, keys)
    publish(client, keys, [{"key": f"m{n}"} for n in range(5)])
    read_and_ack(client, keys, 3)

    before = _retained(cli, keys.stream)
    assert before["entries"] == 5
    assert before["oldest_age_s"] is not None and before["oldest_age_s"] >= 0
    assert before["window_s"] == 86_400 and before["enabled"] is True
    assert "retained 5 entries" in cli("status").out

    assert trim(client, keys, make_settings(stream_retention_s=0)) == 3
    assert _retained(cli, keys.stream)["entries"] == 2
    assert "retained 2 entries" in cli("status").out
