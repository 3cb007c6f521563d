"""A failed publish run raises an error alert naming the run, job and partition."""

from __future__ import annotations

import dagster as dg

from sentinel_platform.sensors.run_failures import SENSOR_NAME, build_run_failure_sensor
from sentinel_platform.settings import Settings
from sentinel_platform.streams.connection import RedisClient
from sentinel_platform_tests.sensors.conftest import DAILY, read_alerts


@dg.asset(partitions_def=DAILY)
def broken_stream() -> None:
    raise RuntimeError("producer paused longer than SENTINEL_MAX_PAUSE_S")


broken_publish = dg.define_asset_job(
    "publish_broken", selection=[broken_stream], partitions_def=DAILY
)


def test_failed_publish_run_raises_alert(
    redis_client: RedisClient, settings: Settings, make_resources, dagster_instance
) -> None:
    defs = dg.Definitions(assets=[broken_stream], jobs=[broken_publish])
    result = defs.resolve_job_def("publish_broken").execute_in_process(
        instance=dagster_instance,
        partition_key="2026-01-05",
        tags={"sentinel/stream": "transactions"},
        raise_on_error=False,
    )
    assert not result.success
    sensor = build_run_failure_sensor([broken_publish])
    with dg.build_run_status_sensor_context(
        sensor_name=SENSOR_NAME,
        dagster_event=result.get_run_failure_event(),
        dagster_instance=dagster_instance,
        dagster_run=result.dagster_run,
        resources={"alerts": make_resources()["alerts"]},
    ) as context:
        sensor(context.for_run_failure())

    (alert,) = read_alerts(redis_client, settings, SENSOR_NAME)
    assert alert.severity == "error" and alert.stream == "transactions"
    assert alert.details["run_id"] == result.run_id
    assert alert.details["job"] == "publish_broken" and alert.details["partition"] == "2026-01-05"
    assert "publish_broken" in alert.summary
