"""The transactions domain's definitions: its assets, quality check and publish job."""

from __future__ import annotations

import dagster as dg

from sentinel_platform.domains.transactions.assets import (
    enriched_transactions,
    publish_transactions,
    raw_transactions,
    transaction_stream,
)
from sentinel_platform.domains.transactions.checks import transactions_quality

ASSETS = [raw_transactions, enriched_transactions, transaction_stream]


def defs() -> dg.Definitions:
    """Group ``transactions``: source, enrich, check, publish (job ``publish_transactions``)."""
    return dg.Definitions(
        assets=ASSETS, asset_checks=[transactions_quality], jobs=[publish_transactions]
    )
