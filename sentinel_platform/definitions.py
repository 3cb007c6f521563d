"""The Dagster code location: every asset, check, job, schedule, sensor and resource, wired here.

Each domain keeps its definitions in its own module; this file only lists them, so a
newcomer sees the whole code location on one screen.
"""

from __future__ import annotations

import dagster as dg

from sentinel_platform.assets import (
    DATA_ASSETS,
    DATA_CHECKS,
    DATA_JOBS,
    data_resources,
    publish_axioms,
    publish_transactions,
)
from sentinel_platform.assets.common import DAILY
from sentinel_platform.assets.execution import spark_executor
from sentinel_platform.demo import demo_publish_schedule
from sentinel_platform.sensors.targets import PublishTarget
from sentinel_platform.sensors.wiring import operations
from sentinel_platform.settings import get_settings

settings = get_settings()
ops = operations(
    publish={
        "transactions": PublishTarget(publish_transactions, DAILY),
        "axioms": PublishTarget(publish_axioms, DAILY),
    }
)

defs = dg.Definitions(
    # --- data: Spark assets publishing to the streams (transactions, axioms, reporting) ---
    assets=[*DATA_ASSETS, *ops.assets],
    asset_checks=[*DATA_CHECKS, *ops.asset_checks],
    jobs=[*DATA_JOBS, *ops.jobs],
    schedules=[*ops.schedules, demo_publish_schedule],
    # --- operations: sensors and stream-health checks ---
    sensors=[*ops.sensors],
    resources={
        **data_resources(settings),
        **ops.resources,
    },
    # Every job, the UI's Materialize included: one process and Spark session per run.
    executor=spark_executor,
)
