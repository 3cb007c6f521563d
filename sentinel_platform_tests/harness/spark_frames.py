"""Spark DataFrames of valid transactions, as the publish assets hand them to the publisher."""

from __future__ import annotations

from typing import Any


def transaction_frame(spark: Any, rows: int, id_format: str, amount: float = 12.5) -> Any:
    """``rows`` valid transactions in two Spark partitions, ids from ``id_format`` (a
    ``format_string`` pattern over the row number), each of ``amount``."""
    from pyspark.sql import functions as F

    return spark.range(rows, numPartitions=2).select(
        F.format_string(id_format, "id").alias("id"),
        F.lit("Kim's Convenience").alias("merchant"),
        F.lit("grocery").alias("category"),
        F.lit("CAD").alias("currency"),
        F.lit(amount).alias("amount"),
        F.lit("Milk and bread").alias("message"),
        F.lit(False).alias("is_threat"),
        F.lit("simulator").alias("source"),
        F.lit("2026-11-21T08:15:30.123Z").alias("timestamp"),
    )
