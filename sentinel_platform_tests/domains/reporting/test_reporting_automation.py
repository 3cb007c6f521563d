"""The reporting assets are kept fresh by their automation conditions, not by hand."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import dagster as dg

from sentinel_platform.definitions import defs

READ_BACK = {dg.AssetKey("transaction_verdicts"), dg.AssetKey("compliance_events")}
REPORT = dg.AssetKey("compliance_report")
AFTER_TICK = datetime(2026, 11, 22, 12, 1, tzinfo=UTC)  # a minute past a */15 tick


def _requested(result: dg.EvaluateAutomationConditionsResult) -> set[dg.AssetKey]:
    return {key for key in READ_BACK | {REPORT} if result.get_num_requested(key)}


def test_reporting_assets_refresh_once_per_tick_with_the_report_after_its_inputs(
    dagster_instance: dg.DagsterInstance,
) -> None:
    before = dg.evaluate_automation_conditions(
        defs=defs, instance=dagster_instance, evaluation_time=AFTER_TICK - timedelta(minutes=2)
    )
    assert _requested(before) == set()
    first = dg.evaluate_automation_conditions(
        defs=defs, instance=dagster_instance, cursor=before.cursor, evaluation_time=AFTER_TICK
    )
    # one tick: both read-backs, and the report after them (its inputs are requested too)
    assert _requested(first) == READ_BACK | {REPORT}
    again = dg.evaluate_automation_conditions(
        defs=defs,
        instance=dagster_instance,
        cursor=first.cursor,
        evaluation_time=AFTER_TICK + timedelta(minutes=1),
    )
    assert _requested(again) == set()  # once per tick, not every evaluation
    later = dg.evaluate_automation_conditions(
        defs=defs,
        instance=dagster_instance,
        cursor=again.cursor,
        evaluation_time=AFTER_TICK + timedelta(minutes=15),
    )
    assert _requested(later) == READ_BACK | {REPORT}  # and again at the next tick
    sensor = defs.get_sensor_def("reporting_automation_sensor")
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
