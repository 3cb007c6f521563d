"""The blocking data-quality check on the day's enriched transactions, before they publish."""

from __future__ import annotations

from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F

from sentinel_platform.domains.shared.data_quality import QualitySuite, quality_check
from sentinel_platform.domains.transactions.assets import enriched_transactions
from sentinel_platform.registry import TRANSACTIONS
from sentinel_platform.schemas import CATEGORIES, CURRENCIES


def transaction_rules(e: Any) -> list[Any]:
    """Unique non-null ids, positive 2-dp amounts, known currencies/categories, a time."""
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
    ]


def amount_over_2dp() -> Column:
    """The amount where it has more than two decimals, else null (no GX expectation says it)."""
    return F.when(F.round("amount", 2) != F.col("amount"), F.col("amount")).alias("amount_over_2dp")


TRANSACTION_SUITE = QualitySuite(
    columns=("id", "amount", "currency", "category", "timestamp"),
    time_column="timestamp",
    rules=transaction_rules,
    helpers=(amount_over_2dp,),
)

transactions_quality = quality_check(
    TRANSACTIONS,
    enriched_transactions,
    TRANSACTION_SUITE,
    "Unique non-null ids, positive 2-dp amounts, known currencies/categories, ISO times.",
)
