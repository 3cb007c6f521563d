"""The DLQ sensor warns before the DLQ's cap trims its oldest entries (the only copy of a
dead letter): WARN at 80% of SENTINEL_DLQ_MAXLEN, ERROR at 95%, once per crossing."""

from __future__ import annotations

from typing import Any

from sentinel_platform.alerting.model import Alert
from sentinel_platform.domains.operations.dead_letters import SENSOR_NAME, dead_letter_queue_sensor
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform_tests.domains.operations.test_dead_letters import dead_letter
from sentinel_platform_tests.harness.operations import read_alerts, tick

CAP = 100  # the smallest SENTINEL_DLQ_MAXLEN allowed


def fill_alerts(client: RedisClient, settings: Settings) -> list[Alert]:
    return [a for a in read_alerts(client, settings, SENSOR_NAME) if a.condition == "dlq_fill"]


def fill_to(client: RedisClient, settings: Settings, total: int) -> None:
    pipe = client.pipeline(transaction=False)
    for n in range(int(client.xlen(settings.dlq_stream)), total):
        pipe.xadd(settings.dlq_stream, dead_letter(f"{n + 1}-0", "transactions").to_fields())
    pipe.execute()


def test_a_filling_dlq_warns_at_80_percent_and_errors_at_95_once_per_crossing(
    redis_client: RedisClient, settings: Settings, make_resources: Any, dagster_instance: Any
) -> None:
    resources = make_resources(dlq_maxlen=CAP)
    fill_to(redis_client, settings, 79)
    cursor = tick(dead_letter_queue_sensor, dagster_instance, resources, None).cursor
    assert fill_alerts(redis_client, settings) == []

    fill_to(redis_client, settings, 80)
    cursor = tick(dead_letter_queue_sensor, dagster_instance, resources, cursor).cursor
    (warning,) = fill_alerts(redis_client, settings)
    assert warning.severity == "warning"
    assert "80%" in warning.summary
    assert "sentinel dlq export" in warning.summary
    assert "SENTINEL_DLQ_MAXLEN" in warning.summary
    assert warning.details["dlq_fill"] == {settings.dlq_stream: {"entries": 80, "cap": CAP}}

    fill_to(redis_client, settings, 94)  # still in the warning band: no second alert
    cursor = tick(dead_letter_queue_sensor, dagster_instance, resources, cursor).cursor
    assert len(fill_alerts(redis_client, settings)) == 1

    fill_to(redis_client, settings, 95)
    cursor = tick(dead_letter_queue_sensor, dagster_instance, resources, cursor).cursor
    error = fill_alerts(redis_client, settings)[-1]
    assert (len(fill_alerts(redis_client, settings)), error.severity) == (2, "error")
    assert "95%" in error.summary and "sentinel dlq export" in error.summary

    tick(dead_letter_queue_sensor, dagster_instance, make_resources(dlq_maxlen=CAP), cursor)
    assert len(fill_alerts(redis_client, settings)) == 2  # a restarted daemon: same cursor


def test_the_fill_alert_rearms_once_the_dlq_is_drained_below_the_warning_level(
    redis_client: RedisClient, settings: Settings, make_resources: Any, dagster_instance: Any
) -> None:
    # No cool-down: only the cursor decides what is a new crossing.
    resources = make_resources(dlq_maxlen=CAP, alert_cooldown_s=0)
    fill_to(redis_client, settings, 85)
    cursor = tick(dead_letter_queue_sensor, dagster_instance, resources, None).cursor
    cursor = tick(dead_letter_queue_sensor, dagster_instance, resources, cursor).cursor
    assert [a.severity for a in fill_alerts(redis_client, settings)] == ["warning"]

    oldest = [entry_id for entry_id, _ in redis_client.xrange(settings.dlq_stream, count=50)]
    redis_client.xdel(settings.dlq_stream, *oldest)  # the operator exported and made room
    cursor = tick(dead_letter_queue_sensor, dagster_instance, resources, cursor).cursor
    assert len(fill_alerts(redis_client, settings)) == 1

    fill_to(redis_client, settings, 81)
    tick(dead_letter_queue_sensor, dagster_instance, resources, cursor)
    assert [a.severity for a in fill_alerts(redis_client, settings)] == ["warning", "warning"]
