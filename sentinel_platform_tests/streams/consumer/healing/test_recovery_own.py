"""A worker's own pending messages: retried when it has them out of hand, and looked for
only then (a busy worker holds every one of its pending messages in hand, and a query
of its own PEL ten times a second would cost the server for nothing)."""

from __future__ import annotations

from sentinel_platform.settings import Settings
from sentinel_platform.streams.consumer.group import ensure_group
from sentinel_platform.streams.consumer.healing.recovery import Recovery
from sentinel_platform.streams.consumer.metrics import Metrics
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.harness.streams import publish


def _xpending_calls(client: RedisClient) -> int:
    return int(client.info("commandstats").get("cmdstat_xpending", {}).get("calls", 0))


def test_own_messages_are_looked_for_only_when_some_are_out_of_hand(
    redis_client: RedisClient, settings: Settings
) -> None:
    client, keys = redis_client, transaction_keys(settings)
    ensure_group(client, keys)
    ids = publish(client, keys, [{"key": f"m{n}"} for n in range(4)])
    client.xreadgroup(keys.group, "us", {keys.stream: ">"}, count=4)
    in_hand = set(ids)
    recovery = Recovery(
        client,
        keys,
        "us",
        lease_ttl_ms=1000,
        reclaim_idle_ms=0,
        retry_backoff_ms=0,
        metrics=Metrics(),
        in_hand=lambda: in_hand,
    )

    before = _xpending_calls(client)
    assert recovery.step(budget=100) == []
    assert _xpending_calls(client) - before == 1  # the summary alone

    in_hand.discard(ids[2])  # its call failed: it waits for its retry, out of hand
    claimed = recovery.step(budget=100)
    assert [d.id for d in claimed] == [ids[2]]
    assert claimed[0].claimed_from == "us" and claimed[0].deliveries == 2
