"""Everything the operations domain adds to the code location, in one ``dg.Definitions``.

The publish jobs belong to the data domains: ``definitions.py`` passes them in, so this
package never imports a data domain, and the lag gate launches whatever it is given.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import dagster as dg

from sentinel_platform.domains.operations.ai_health_sensor import build_ai_health_sensor
from sentinel_platform.domains.operations.dead_letters import dead_letter_queue_sensor
from sentinel_platform.domains.operations.delivery import build_delivery_sensor
from sentinel_platform.domains.operations.lag_gate import build_lag_sensor
from sentinel_platform.domains.operations.run_failures import build_run_failure_sensor
from sentinel_platform.domains.operations.stream_health import (
    build_checks_schedule,
    build_stream_health_checks,
)
from sentinel_platform.domains.operations.targets import (
    PublishTarget,
    StreamTarget,
    dead_letter_queue,
    stream_targets,
)
from sentinel_platform.resources.alerts import AlertSink
from sentinel_platform.resources.settings import SettingsResource
from sentinel_platform.resources.stream_inspector import StreamInspector


def defs(
    settings: SettingsResource,
    publish: Mapping[str, PublishTarget] | None = None,
    streams: Sequence[StreamTarget] | None = None,
) -> dg.Definitions:
    """The DLQ asset, the stream-health checks and their schedule, the sensors and the
    ``settings``/``alerts``/``stream_inspector`` resources; ``publish`` maps stream names
    to the jobs the lag gate launches."""
    streams = stream_targets() if streams is None else streams
    checks = build_stream_health_checks(streams)
    return dg.Definitions(
        assets=[dead_letter_queue],
        asset_checks=checks,
        schedules=[build_checks_schedule(checks)],
        sensors=[
            build_lag_sensor(streams, dict(publish or {})),
            dead_letter_queue_sensor,
            build_delivery_sensor(streams),
            build_run_failure_sensor(),  # every job of the location, the UI's __ASSET_JOB too
            build_ai_health_sensor(streams),
        ],
        resources={
            "settings": settings,
            "alerts": AlertSink(settings=settings),
            "stream_inspector": StreamInspector(),
        },
    )
