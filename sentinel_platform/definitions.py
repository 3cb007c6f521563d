"""The Dagster code location: every asset, check, job, schedule, sensor and resource, wired here.

Each domain keeps its definitions in its own module; this file only lists them, so a
newcomer sees the whole code location on one screen.
"""

from __future__ import annotations

import dagster as dg

from sentinel_platform.settings import get_settings

settings = get_settings()

defs = dg.Definitions(
    # --- data: Spark assets publishing to the streams (transactions, axioms, reporting) ---
    assets=[],
    asset_checks=[],
    jobs=[],
    schedules=[],
    # --- operations: sensors and stream-health checks ---
    sensors=[],
    resources={},
)
