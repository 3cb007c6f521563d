"""The operations sensors' shell: running by default, its cursor read safely, and the body
given the tick's settings, a client on the real Redis, and the alert sink."""

from __future__ import annotations

from typing import Any

import dagster as dg
import pytest

from sentinel_platform.alerting.model import Alert
from sentinel_platform.domains.operations.cursor import dump_cursor
from sentinel_platform.domains.operations.sensor_shell import SensorTick, operations_sensor
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform_tests.harness.operations import read_alerts, tick

NAME = "shell_probe_sensor"


def probe(seen: list[dict[str, Any]]) -> dg.SensorDefinition:
    """A sensor that reads one key with the tick's client, alerts, and counts its ticks."""

    @operations_sensor(NAME, 45, "Probes the shell.")
    def _probe(tick: SensorTick) -> dg.SensorResult:
        with tick.client() as client:
            value = client.get("probe")
        seen.append({"cursor": tick.cursor, "value": value, "stream": tick.settings.dlq_stream})
        tick.alerts.send(Alert(severity="warning", source=NAME, condition="probe", summary="p"))
        count = int(tick.cursor.get("ticks", 0)) + 1
        return dg.SensorResult(skip_reason="probed", cursor=dump_cursor({"ticks": count}))

    return _probe


def test_a_shell_sensor_runs_by_default_with_its_name_interval_and_description() -> None:
    sensor = probe([])
    assert (sensor.name, sensor.minimum_interval_seconds, sensor.description) == (
        NAME,
        45,
        "Probes the shell.",
    )
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    assert sensor.required_resource_keys == {"settings", "stream_inspector", "alerts"}


@pytest.mark.parametrize(
    ("cursor", "expected"),
    [
        (None, {}),  # the first tick
        ('{"ticks": 2}', {"ticks": 2}),
        ("not json", {}),  # an unreadable cursor starts fresh rather than failing
    ],
)
def test_the_body_gets_the_cursor_settings_client_and_alerts_of_the_tick(
    cursor: str | None,
    expected: dict[str, Any],
    redis_client: RedisClient,
    settings: Settings,
    make_resources: Any,
    dagster_instance: dg.DagsterInstance,
) -> None:
    resources = make_resources()
    redis_client.set("probe", "on the real server")
    seen: list[dict[str, Any]] = []
    data = tick(probe(seen), dagster_instance, resources, cursor)
    assert seen == [
        {"cursor": expected, "value": "on the real server", "stream": settings.dlq_stream}
    ]
    assert data.cursor == dump_cursor({"ticks": int(expected.get("ticks", 0)) + 1})
    assert [alert.condition for alert in read_alerts(redis_client, settings, NAME)] == ["probe"]
