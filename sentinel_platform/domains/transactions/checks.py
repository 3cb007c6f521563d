"""The blocking data-quality check on the day's enriched transactions, before they publish."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sentinel_platform.domains.shared.data_quality import (
    ISO_8601,
    quality_check,
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


transactions_quality = quality_check(
    enriched_transactions,
    "transactions_quality",
    "transactions",
    transaction_view,
    transaction_expectations,
    "Unique non-null ids, positive 2-dp amounts, known currencies/categories, ISO times.",
)
