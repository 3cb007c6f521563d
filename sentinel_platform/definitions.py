"""The Dagster code location: every domain's definitions, merged.

Each domain (``sentinel_platform.domains.*``) owns its assets, checks, jobs, schedules
and sensors; the operations domain gets the publish jobs it gates from here, so no
domain imports another one sideways. One settings resource is the only way any of them
reads the settings.
"""

from __future__ import annotations

import dagster as dg

from sentinel_platform.domains import axioms, demo, operations, reporting, shared, transactions
from sentinel_platform.domains.shared.common import DAILY
from sentinel_platform.resources.settings import SettingsResource

settings = SettingsResource()

defs = dg.Definitions.merge(
    shared.defs(settings),  # Spark resources and the one-session-per-run executor
    transactions.defs(),
    axioms.defs(),
    reporting.defs(),
    operations.defs(
        settings,
        publish={
            "transactions": operations.PublishTarget(transactions.publish_transactions, DAILY),
            "axioms": operations.PublishTarget(axioms.publish_axioms, DAILY),
        },
    ),
    demo.defs(settings),
)
