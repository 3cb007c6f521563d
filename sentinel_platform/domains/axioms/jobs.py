"""The job that builds, checks and publishes one day of axioms."""

from __future__ import annotations

import dagster as dg

from sentinel_platform.domains.axioms.assets import axiom_stream
from sentinel_platform.domains.shared.common import DAILY, publish_selection

publish_axioms = dg.define_asset_job(
    "publish_axioms",
    selection=publish_selection("axioms", axiom_stream),
    partitions_def=DAILY,
    description="Build, check and publish one day of axioms to the axiom stream.",
)
