"""Messages a stopping worker handed back are no delivery anomaly, and the hand-back
holder (``HANDBACK_CONSUMER``) leaves the group once it holds nothing; never while it
holds a message, which its deletion would drop from the group for good."""

from __future__ import annotations

from typing import Any

import pytest

from sentinel_platform.domains.operations.delivery import SENSOR_NAME, build_delivery_sensor
from sentinel_platform.domains.operations.handback import (
    HANDBACK_CONSUMER,
    prune_handback,
)
from sentinel_platform.domains.operations.targets import TRANSACTIONS
from sentinel_platform.settings import Settings
from sentinel_platform.streams.consumer.metrics import Metrics
from sentinel_platform.streams.consumer.outcomes import Delivery
from sentinel_platform.streams.consumer.settling.outbox import Outbox
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, transaction_keys
from sentinel_platform_tests.harness.operations import read_alerts, tick

WORKER = "worker-a"


def consumers(client: RedisClient, keys: StreamKeys) -> set[str]:
    return {c["name"] for c in client.xinfo_consumers(keys.stream, keys.group)}


def stop_with_messages_in_hand(
    client: RedisClient, keys: StreamKeys, settings: Settings, count: int
) -> list[str]:
    """A worker reads ``count`` messages and stops before it processes them: it hands
    them back through the consumer's own code, as its stop does."""
    client.xgroup_create(keys.stream, keys.group, id="0", mkstream=True)
    for i in range(count):
        client.xadd(keys.stream, {"data": f'{{"i": {i}}}'})
    read: Any = client.xreadgroup(keys.group, "stopping", {keys.stream: ">"}, count=count)
    deliveries = [Delivery(entry_id, fields, 1) for _, got in read for entry_id, fields in got]
    Outbox(client, keys, settings, "stopping", Metrics(), {}).hand_back(deliveries)
    client.xgroup_delconsumer(keys.stream, keys.group, "stopping")  # the stopping one prunes
    return [d.id for d in deliveries]


def live(client: RedisClient, keys: StreamKeys, consumer: str = WORKER) -> None:
    client.hset(keys.consumers, consumer, "pid")
    client.set(keys.lease(consumer), "1", px=60_000)


@pytest.mark.parametrize("worker_alive", [True, False])
def test_handed_back_messages_are_no_anomaly(
    redis_client: RedisClient,
    settings: Settings,
    make_resources,
    dagster_instance,
    worker_alive: bool,
) -> None:
    """Handed-back messages carry an idle time past every claim threshold on purpose, and
    their holder never has a lease: neither is an idle or orphaned message. With a live
    worker they are claimed at its next step; with none they wait for the next one (the
    lag check says no worker is alive)."""
    keys = transaction_keys(settings)
    stop_with_messages_in_hand(redis_client, keys, settings, 3)
    if worker_alive:
        live(redis_client, keys)
    sensor = build_delivery_sensor([TRANSACTIONS], 3)

    data = tick(sensor, dagster_instance, make_resources(lease_ttl_ms=200), None)

    (evaluation,) = data.asset_events
    meta = {k: v.value for k, v in evaluation.metadata.items()}
    assert evaluation.passed, evaluation.description
    assert meta["handed_back"] == 3 and meta["idle"] == 0 and meta["orphaned_messages"] == 0
    assert read_alerts(redis_client, settings, SENSOR_NAME) == []
    assert HANDBACK_CONSUMER in consumers(redis_client, keys)  # it still holds them


def test_the_empty_hand_back_holder_is_pruned_by_the_sensor(
    redis_client: RedisClient, settings: Settings, make_resources, dagster_instance
) -> None:
    keys = transaction_keys(settings)
    ids = stop_with_messages_in_hand(redis_client, keys, settings, 2)
    live(redis_client, keys)
    redis_client.xclaim(keys.stream, keys.group, WORKER, 0, ids)  # the survivor claims them
    redis_client.xack(keys.stream, keys.group, *ids)
    assert HANDBACK_CONSUMER in consumers(redis_client, keys)
    sensor = build_delivery_sensor([TRANSACTIONS], 3, handback_idle_ms=0)

    data = tick(sensor, dagster_instance, make_resources(), None)

    assert consumers(redis_client, keys) == {WORKER}
    assert "the empty hand-back holder pruned" in (data.skip_message or "")


def test_a_recent_hand_back_holder_is_kept_until_its_idle_bound(
    redis_client: RedisClient, settings: Settings
) -> None:
    keys = transaction_keys(settings)
    ids = stop_with_messages_in_hand(redis_client, keys, settings, 1)
    redis_client.xclaim(keys.stream, keys.group, WORKER, 0, ids)
    assert prune_handback(redis_client, keys, idle_bound_ms=3_600_000) == "recent"
    assert prune_handback(redis_client, keys, idle_bound_ms=0) == "pruned"
    assert prune_handback(redis_client, keys, idle_bound_ms=0) == "absent"
    assert HANDBACK_CONSUMER not in consumers(redis_client, keys)


def test_a_hand_back_holder_holding_a_message_is_never_pruned(
    redis_client: RedisClient, settings: Settings
) -> None:
    """The pending count is judged in the same script as the deletion: a stop handing
    messages back between a read of the count and an ``XGROUP DELCONSUMER`` would
    otherwise lose them (a deleted consumer's pending entries leave the group)."""
    keys = transaction_keys(settings)
    ids = stop_with_messages_in_hand(redis_client, keys, settings, 2)

    assert prune_handback(redis_client, keys, idle_bound_ms=0) == "holds"

    pending: Any = redis_client.xpending_range(keys.stream, keys.group, "-", "+", 10)
    assert [p["message_id"] for p in pending] == ids
    assert {p["consumer"] for p in pending} == {HANDBACK_CONSUMER}


def test_no_group_yet_prunes_nothing(redis_client: RedisClient, settings: Settings) -> None:
    assert prune_handback(redis_client, transaction_keys(settings), idle_bound_ms=0) == "absent"
