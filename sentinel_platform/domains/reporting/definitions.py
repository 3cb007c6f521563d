"""The reporting domain's definitions: read-back assets, the report, their job, the daily
verdict quality and its job, and the sensor that keeps them fresh."""

from __future__ import annotations

import dagster as dg

from sentinel_platform.domains.reporting.assets import (
    compliance_events,
    compliance_report,
    transaction_verdicts,
)
from sentinel_platform.domains.reporting.quality_asset import verdict_quality
from sentinel_platform.domains.shared.common import DAILY

ASSETS = [transaction_verdicts, compliance_events, compliance_report]

report_compliance = dg.define_asset_job(
    "report_compliance",
    selection=dg.AssetSelection.groups("reporting") - dg.AssetSelection.assets(verdict_quality),
    description="Read the workers' result streams back and summarise them.",
)
#: One day's verdict quality (a daily partition, so a job of its own).
report_quality = dg.define_asset_job(
    "report_quality",
    selection=dg.AssetSelection.assets(verdict_quality),
    partitions_def=DAILY,
    description="Measure a day's verdicts against the truth and the rules, per model.",
)

reporting_automation_sensor = dg.AutomationConditionSensorDefinition(
    "reporting_automation_sensor",
    target=dg.AssetSelection.groups("reporting"),
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=60,
    description="Keeps the reporting assets fresh (their automation conditions).",
)


def defs() -> dg.Definitions:
    """Group ``reporting``, jobs ``report_compliance`` and ``report_quality``,
    ``reporting_automation_sensor``."""
    return dg.Definitions(
        assets=[*ASSETS, verdict_quality],
        jobs=[report_compliance, report_quality],
        sensors=[reporting_automation_sensor],
    )
