"""The blocking data-quality check on the day's enriched transactions, before they publish."""

from __future__ import annotations

import warnings
from typing import Any

import dagster as dg
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sentinel_platform.domains.shared.common import DAILY
from sentinel_platform.domains.shared.data_quality import (
    ISO_8601,
    run_suite,
    timestamp_unparseable,
)
from sentinel_platform.domains.shared.landing import CORRUPT
from sentinel_platform.domains.transactions.assets import enriched_transactions
from sentinel_platform.schemas import CATEGORIES, CURRENCIES


def transaction_expectations() -> list[Any]:
    """Unique non-null ids, positive 2-dp amounts, known currencies/categories, ISO times."""
    import great_expectations as gx

    e = gx.expectations
    return [
        e.ExpectColumnValuesToNotBeNull(column="id"),
        e.ExpectColumnValuesToBeUnique(column="id"),
        e.ExpectColumnValuesToNotBeNull(column="amount"),
        e.ExpectColumnValuesToBeBetween(column="amount", min_value=0, strict_min=True),
        e.ExpectColumnValuesToBeNull(column="amount_over_2dp"),
        e.ExpectColumnValuesToNotBeNull(column="currency"),
        e.ExpectColumnValuesToBeInSet(column="currency", value_set=sorted(CURRENCIES)),
        e.ExpectColumnValuesToNotBeNull(column="category"),
        e.ExpectColumnValuesToBeInSet(column="category", value_set=list(CATEGORIES)),
        e.ExpectColumnValuesToNotBeNull(column="timestamp"),
        e.ExpectColumnValuesToMatchRegex(column="timestamp", regex=ISO_8601),
        e.ExpectColumnValuesToBeNull(column="timestamp_unparseable"),
        e.ExpectColumnValuesToBeNull(column=CORRUPT),
    ]


def transaction_view(df: DataFrame) -> DataFrame:
    """The columns GX checks, with the helper columns holding the offending values."""
    return df.select(
        "id",
        "amount",
        "currency",
        "category",
        "timestamp",
        CORRUPT,
        F.when(F.round("amount", 2) != F.col("amount"), F.col("amount")).alias("amount_over_2dp"),
        timestamp_unparseable("timestamp"),
    )


with warnings.catch_warnings():
    # ``partitions_def`` on an asset check is a Dagster preview; daily checks need it.
    warnings.simplefilter("ignore", category=dg.PreviewWarning)

    @dg.asset_check(asset=enriched_transactions, blocking=True, partitions_def=DAILY)
    def transactions_quality(enriched_transactions: DataFrame) -> dg.AssetCheckResult:
        """Unique non-null ids, positive 2-dp amounts, known currencies/categories, ISO times."""
        return run_suite(
            enriched_transactions, "transactions", transaction_view, transaction_expectations()
        )
