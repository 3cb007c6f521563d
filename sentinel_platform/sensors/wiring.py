"""Everything the operations layer adds to the code location, assembled in one call.

``definitions.py`` passes the publish jobs (owned by the Spark side) and gets back the
DLQ asset, the stream-health checks and their schedule, the four sensors and the two
resources, so the two halves of the code location stay independent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg
from dagster._core.definitions.unresolved_asset_job_definition import (
    UnresolvedAssetJobDefinition,
)

from sentinel_platform.assets.reporting import reporting_automation_sensor
from sentinel_platform.checks.stream_health import build_checks_schedule, build_stream_health_checks
from sentinel_platform.resources.alerts import AlertSink
from sentinel_platform.resources.stream_inspector import StreamInspector
from sentinel_platform.sensors.dead_letters import dead_letter_queue_sensor
from sentinel_platform.sensors.delivery import build_delivery_sensor
from sentinel_platform.sensors.lag_gate import build_lag_sensor
from sentinel_platform.sensors.run_failures import build_run_failure_sensor
from sentinel_platform.sensors.targets import (
    STREAM_TARGETS,
    PublishTarget,
    StreamTarget,
    dead_letter_queue,
)


@dataclass(frozen=True)
class Operations:
    assets: list[dg.AssetSpec]
    asset_checks: list[dg.AssetChecksDefinition]
    jobs: list[UnresolvedAssetJobDefinition]
    schedules: list[dg.ScheduleDefinition]
    sensors: list[dg.SensorDefinition]
    resources: dict[str, Any]


def operations(
    publish: Mapping[str, PublishTarget] | None = None,
    streams: Sequence[StreamTarget] = STREAM_TARGETS,
    resources: Mapping[str, Any] | None = None,
) -> Operations:
    """The operations definitions; ``publish`` maps stream names to their publish jobs."""
    publish = dict(publish or {})
    checks = build_stream_health_checks(streams)
    checks_job, checks_schedule = build_checks_schedule(checks)
    sensors = [
        build_lag_sensor(streams, publish),
        dead_letter_queue_sensor,
        build_delivery_sensor(streams),
        build_run_failure_sensor(),  # every job of the location, the UI's __ASSET_JOB too
        reporting_automation_sensor,
    ]
    return Operations(
        assets=[dead_letter_queue],
        asset_checks=checks,
        jobs=[checks_job],
        schedules=[checks_schedule],
        sensors=sensors,
        resources=dict(resources or {"alerts": AlertSink(), "stream_inspector": StreamInspector()}),
    )
