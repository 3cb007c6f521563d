"""The reporting domain's definitions: read-back assets, the report, their job and the
sensor that keeps them fresh."""

from __future__ import annotations

import dagster as dg

from sentinel_platform.domains.reporting.assets import (
    compliance_events,
    compliance_report,
    transaction_verdicts,
)

ASSETS = [transaction_verdicts, compliance_events, compliance_report]

report_compliance = dg.define_asset_job(
    "report_compliance",
    selection=dg.AssetSelection.groups("reporting"),
    description="Read the workers' result streams back and summarise them.",
)

reporting_automation_sensor = dg.AutomationConditionSensorDefinition(
    "reporting_automation_sensor",
    target=dg.AssetSelection.groups("reporting"),
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=60,
    description="Keeps the reporting assets fresh (their automation conditions).",
)


def defs() -> dg.Definitions:
    """Group ``reporting``, job ``report_compliance``, ``reporting_automation_sensor``."""
    return dg.Definitions(
        assets=ASSETS, jobs=[report_compliance], sensors=[reporting_automation_sensor]
    )
