"""Delivery-count anomalies each raise their alert; a healthy pipeline raises none."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sentinel_platform.domains.operations.delivery import SENSOR_NAME, build_delivery_sensor
from sentinel_platform.domains.operations.targets import TRANSACTIONS
from sentinel_platform.settings import Settings
from sentinel_platform.streams.operators import analyzer_holds as holds
from sentinel_platform.streams.operators.group_view import scan_pending
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, transaction_keys
from sentinel_platform_tests.harness.operations import read_alerts, tick
from sentinel_platform_tests.harness.waits import wait_until

WINDOW = 3


def group(client: RedisClient, settings: Settings) -> StreamKeys:
    keys = transaction_keys(settings)
    client.xgroup_create(keys.stream, keys.group, id="0", mkstream=True)
    return keys


def live(client: RedisClient, keys: StreamKeys, consumer: str) -> None:
    """What a worker does at start: register and hold a lease."""
    client.hset(keys.consumers, consumer, "pid")
    client.set(keys.lease(consumer), "1", px=60_000)


def deliver(client: RedisClient, keys: StreamKeys, consumer: str, count: int = 1) -> list[str]:
    for i in range(count):
        client.xadd(keys.stream, {"data": f'{{"i": {i}}}'})
    read = client.xreadgroup(keys.group, consumer, {keys.stream: ">"}, count=count)
    return [entry_id for _, entries in read for entry_id, _ in entries]


@dataclass
class Ticker:
    """The delivery sensor over a window of :data:`WINDOW` ticks, its cursor carried on."""

    instance: Any
    resources: dict[str, Any]
    cursor: str | None = None

    def __post_init__(self) -> None:
        self.sensor = build_delivery_sensor([TRANSACTIONS], WINDOW)

    def tick(self) -> Any:
        data = tick(self.sensor, self.instance, self.resources, self.cursor)
        self.cursor = data.cursor
        return data


def live_group(client: RedisClient, settings: Settings) -> StreamKeys:
    """The group, with one live consumer (``live-1``) that the tests deliver to."""
    keys = group(client, settings)
    live(client, keys, "live-1")
    return keys


def kinds(client: RedisClient, settings: Settings) -> list[str]:
    return [a.details["kind"] for a in read_alerts(client, settings, SENSOR_NAME)]


def test_message_held_by_consumer_without_lease_raises_orphan_alert(
    redis_client: RedisClient, settings: Settings, make_resources, dagster_instance
) -> None:
    keys = live_group(redis_client, settings)
    ids = deliver(redis_client, keys, "dead-1", 2)  # a worker that died without its lease
    wait_until(lambda: all(e.idle_ms >= 200 for e in scan_pending(redis_client, keys)), 5)
    sensor = build_delivery_sensor([TRANSACTIONS], WINDOW)

    data = tick(sensor, dagster_instance, make_resources(lease_ttl_ms=200), None)

    (evaluation,) = data.asset_events
    assert not evaluation.passed and evaluation.metadata["orphaned_messages"].value == 2
    (alert,) = read_alerts(redis_client, settings, SENSOR_NAME)
    assert alert.details["kind"] == "orphaned" and alert.details["consumer"] == "dead-1"
    assert alert.details["count"] == 2 and alert.details["ids"] == ids
    assert alert.severity == "warning" and alert.stream == keys.stream  # a live peer exists


def test_message_one_delivery_from_limit_raises_alert(
    redis_client: RedisClient, settings: Settings, make_resources, dagster_instance
) -> None:
    keys = live_group(redis_client, settings)
    (message_id,) = deliver(redis_client, keys, "live-1")
    redis_client.xclaim(
        keys.stream, keys.group, "live-1", min_idle_time=0, message_ids=[message_id]
    )
    sensor = build_delivery_sensor([TRANSACTIONS], WINDOW)

    tick(sensor, dagster_instance, make_resources(reclaim_delivery_limit=3), None)

    (alert,) = read_alerts(redis_client, settings, SENSOR_NAME)
    assert alert.details["kind"] == "near_limit" and alert.details["ids"] == [message_id]
    assert alert.details["max_deliveries"] == 2 and alert.details["by_consumer"] == {"live-1": 1}


def test_message_idle_past_reclaim_raises_alert(
    redis_client: RedisClient, settings: Settings, make_resources, dagster_instance
) -> None:
    keys = live_group(redis_client, settings)
    deliver(redis_client, keys, "live-1")
    wait_until(lambda: all(e.idle_ms > 150 for e in scan_pending(redis_client, keys)), 5)
    sensor = build_delivery_sensor([TRANSACTIONS], WINDOW)
    tick(sensor, dagster_instance, make_resources(reclaim_idle_ms=100), None)
    assert kinds(redis_client, settings) == ["idle"]


def test_consumer_whose_pending_only_grows_is_reported_stalled_after_a_window(
    redis_client: RedisClient, settings: Settings, make_resources, dagster_instance
) -> None:
    keys = live_group(redis_client, settings)
    sensor = Ticker(dagster_instance, make_resources())
    seen = []
    for _ in range(WINDOW):
        deliver(redis_client, keys, "live-1")  # reads, never acks
        sensor.tick()
        seen.append(kinds(redis_client, settings))
    assert seen[: WINDOW - 1] == [[]] * (WINDOW - 1)  # one sample is not a verdict
    (alert,) = read_alerts(redis_client, settings, SENSOR_NAME)
    assert alert.details["kind"] == "stalled" and alert.details["window"] == [1, 2, 3]
    assert alert.details["consumer"] == "live-1" and alert.severity == "error"
    assert alert.details["oldest_id"] == scan_pending(redis_client, keys)[0].message_id


def test_consumer_whose_pending_grows_while_it_settles_is_not_stalled(
    redis_client: RedisClient, settings: Settings, make_resources, dagster_instance
) -> None:
    """A worker raising its in-flight limit holds more each tick, and settles all along."""
    keys = live_group(redis_client, settings)
    sensor = Ticker(dagster_instance, make_resources())
    held: list[str] = []
    for _ in range(WINDOW + 1):
        if held:
            redis_client.xack(keys.stream, keys.group, held.pop(0))  # its oldest is done
        held += deliver(redis_client, keys, "live-1", 2)  # and it takes two more
        sensor.tick()
    assert len(held) == WINDOW + 2  # pending only grew, tick after tick
    assert kinds(redis_client, settings) == []  # but the consumer progressed: no stall


def test_healthy_pipeline_raises_no_anomaly_alert(
    redis_client: RedisClient, settings: Settings, make_resources, dagster_instance
) -> None:
    keys = live_group(redis_client, settings)
    sensor = Ticker(dagster_instance, make_resources())
    for _ in range(WINDOW + 1):
        ids = deliver(redis_client, keys, "live-1", 5)
        redis_client.xack(keys.stream, keys.group, *ids[:-1])  # one in flight, as usual
        data = sensor.tick()
        redis_client.xack(keys.stream, keys.group, ids[-1])
        assert "0 anomaly kind(s)" in data.skip_message
        assert [e.passed for e in data.asset_events] == [True]
    assert read_alerts(redis_client, settings) == []


def test_a_live_workers_idle_message_is_no_anomaly_while_an_analyzer_hold_stands(
    redis_client: RedisClient, settings: Settings, make_resources, dagster_instance
) -> None:
    """A worker's read-ahead waits for its analyzer while the fleet is held (a spent
    quota, a ``Retry-After``, pacing to an announced budget): idle past reclaim, yet no
    stuck worker. Without a hold the same wait is the idle anomaly."""
    keys = live_group(redis_client, settings)
    deliver(redis_client, keys, "live-1", 2)
    wait_until(lambda: all(e.idle_ms >= 200 for e in scan_pending(redis_client, keys)), 5)
    resources = make_resources(reclaim_idle_ms=100)
    sensor = build_delivery_sensor([TRANSACTIONS], WINDOW)
    holds.register(redis_client, "gpt", "https://api.example.com/v1")
    record = holds.encode_hold("gpt", "", holds.ANNOUNCED_LIMIT, "budget refilling", 30)
    redis_client.set(holds.hold_key("gpt"), record, ex=30)

    (held,) = tick(sensor, dagster_instance, resources, None).asset_events
    redis_client.delete(holds.hold_key("gpt"))
    (free,) = tick(sensor, dagster_instance, resources, None).asset_events

    assert held.passed and held.metadata["waiting_on_analyzer"].value == 2, held.description
    assert "2 idle waiting for the analyzer" in (held.description or "")
    assert not free.passed and free.metadata["idle"].value == 2
    assert kinds(redis_client, settings) == ["idle"]


def test_a_live_workers_idle_message_is_no_anomaly_while_every_message_is_a_model_call(
    redis_client: RedisClient, settings: Settings, make_resources, dagster_instance
) -> None:
    """A model server answering one call at a time makes a worker's read-ahead wait its
    turn past the reclaim idle time: the analyzer's capacity, not a stuck worker."""
    keys = live_group(redis_client, settings)
    deliver(redis_client, keys, "live-1", 2)
    for n in range(9):
        redis_client.xadd(keys.results, {"driver_used": "analyzer", "n": str(n)})
    wait_until(lambda: all(e.idle_ms >= 200 for e in scan_pending(redis_client, keys)), 5)
    url = "http://127.0.0.1:9/v1/chat/completions"
    resources = make_resources(reclaim_idle_ms=100, analyzer_url=url)
    sensor = build_delivery_sensor([TRANSACTIONS], WINDOW)

    (evaluation,) = tick(sensor, dagster_instance, resources, None).asset_events

    assert evaluation.passed, evaluation.description
    assert evaluation.metadata["waiting_on_analyzer"].value == 2
    assert kinds(redis_client, settings) == []
