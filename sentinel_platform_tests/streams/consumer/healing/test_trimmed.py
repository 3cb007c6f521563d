"""Pending ids whose entries were trimmed or deleted are acknowledged away, never lost."""

from __future__ import annotations

from sentinel_platform.streams.consumer.group import ensure_group
from sentinel_platform.streams.consumer.healing.recovery import Recovery
from sentinel_platform.streams.consumer.metrics import Metrics
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.harness.streams import publish


def test_trimmed_pending_ids_are_acknowledged_away_and_the_rest_recovered(
    redis_client: RedisClient, settings
) -> None:
    client, keys = redis_client, transaction_keys(settings)
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
