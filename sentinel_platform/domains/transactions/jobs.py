"""The job that builds, checks and publishes one day of transactions."""

from __future__ import annotations

import dagster as dg

from sentinel_platform.domains.shared.common import DAILY, publish_selection
from sentinel_platform.domains.transactions.assets import transaction_stream

publish_transactions = dg.define_asset_job(
    "publish_transactions",
    selection=publish_selection("transactions", transaction_stream),
    partitions_def=DAILY,
    description="Build, check and publish one day of transactions to the transactions stream.",
)
