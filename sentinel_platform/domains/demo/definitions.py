"""The demo domain's definitions: the demo job and its schedule."""

from __future__ import annotations

import dagster as dg

from sentinel_platform.domains.demo.schedule import build_demo_schedule, demo_publish
from sentinel_platform.domains.demo.traffic import demo_traffic
from sentinel_platform.resources.settings import SettingsResource


def defs(settings: SettingsResource) -> dg.Definitions:
    """Asset ``demo_traffic``, its job ``demo_publish`` and ``demo_publish_schedule``,
    running by default when the ``demo`` setting (``SENTINEL_DEMO``) is on."""
    return dg.Definitions(
        assets=[demo_traffic],
        jobs=[demo_publish],
        schedules=[build_demo_schedule(running=settings.load().demo)],
        resources={"settings": settings},
    )
