"""The axioms domain's definitions: its assets, quality check and publish job."""

from __future__ import annotations

import dagster as dg

from sentinel_platform.domains.axioms.assets import (
    axiom_stream,
    axioms,
    publish_axioms,
    telemetry_readings,
)
from sentinel_platform.domains.axioms.checks import axioms_quality

ASSETS = [telemetry_readings, axioms, axiom_stream]


def defs() -> dg.Definitions:
    """Group ``axioms``: telemetry, axioms, check, publish (job ``publish_axioms``)."""
    return dg.Definitions(assets=ASSETS, asset_checks=[axioms_quality], jobs=[publish_axioms])
