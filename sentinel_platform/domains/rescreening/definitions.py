"""The re-screening domain's definitions: one ``rescreen_<stream>`` job per analyzed stream."""

from __future__ import annotations

import dagster as dg

from sentinel_platform.domains.rescreening.jobs import JOBS


def defs() -> dg.Definitions:
    """Jobs ``rescreen_transactions`` and ``rescreen_axioms`` (daily partitioned)."""
    return dg.Definitions(jobs=JOBS)
