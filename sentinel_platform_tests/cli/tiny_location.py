"""A tiny code location for the storage tests: a daily-partitioned asset and a sensor with
a cursor, without the platform's Spark code (which takes far longer to load)."""

from __future__ import annotations

import dagster as dg

DAILY = dg.DailyPartitionsDefinition(start_date="2026-01-01")


@dg.asset(partitions_def=DAILY)
def tiny_partitioned() -> int:
    return 1


#: Log lines of :func:`chatty_partitioned`'s runs.
CHATTY_LINES = 400


@dg.asset(partitions_def=DAILY, name="tiny_partitioned")
def chatty_partitioned() -> int:
    """The same asset with a long event log (not in ``defs``): a run whose copy takes time."""
    logger = dg.get_dagster_logger()
    for line in range(CHATTY_LINES):
        logger.info(f"line {line}")
    return 1


@dg.sensor(name="tiny_cursor_sensor", minimum_interval_seconds=3600)
def tiny_cursor_sensor(context: dg.SensorEvaluationContext) -> dg.SkipReason:
    return dg.SkipReason(f"cursor {context.cursor}")


defs = dg.Definitions(assets=[tiny_partitioned], sensors=[tiny_cursor_sensor])
