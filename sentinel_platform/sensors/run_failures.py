"""Alert when a publish run fails (including a pause that outlived SENTINEL_MAX_PAUSE_S)."""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg

from sentinel_platform.alerting.model import Alert
from sentinel_platform.resources.alerts import AlertSink
from sentinel_platform.sensors.targets import PublishJob

SENSOR_NAME = "publish_run_failure_sensor"


def run_failure_alert(context: dg.RunFailureSensorContext) -> Alert:
    run = context.dagster_run
    message = context.failure_event.message or "run failed"
    first_line = message.strip().splitlines()[0] if message.strip() else "run failed"
    partition = run.tags.get("dagster/partition")
    stream = run.tags.get("sentinel/stream")
    where = f" partition {partition}" if partition else ""
    return Alert(
        severity="error",
        source=SENSOR_NAME,
        stream=stream,
        condition=f"run:{run.run_id}",
        summary=f"publish run {run.run_id[:8]} of {run.job_name}{where} failed: {first_line}",
        details={
            "run_id": run.run_id,
            "job": run.job_name,
            "partition": partition,
            "message": message[:2000],
            "launched_by": run.tags.get("sentinel/launched_by"),
        },
    )


def build_run_failure_sensor(
    jobs: Sequence[PublishJob], name: str = SENSOR_NAME
) -> dg.SensorDefinition:
    @dg.run_failure_sensor(
        name=name,
        monitored_jobs=list(jobs),
        default_status=dg.DefaultSensorStatus.RUNNING,
        description="Alerts when a publish run fails.",
    )
    def _sensor(context: dg.RunFailureSensorContext, alerts: AlertSink) -> None:
        alerts.send(run_failure_alert(context))

    return _sensor
