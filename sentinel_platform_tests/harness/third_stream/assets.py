"""The ``payments`` stream's Dagster side: its Spark source asset, publish asset and job.

The source asset ``payments`` is the stream's own transformation; the publish asset comes
from the platform's factory (:func:`~sentinel_platform.domains.shared.publish.publish_asset`)
over the stream's spec, so it is in the stream's concurrency pool like the built-in ones.
The stream's spec names this module's ``defs`` (``StreamSpec.definitions``), so the
platform's own code location (``sentinel_platform.definitions``) merges them and gives
the stream the operations domain's health checks, lag gate and delivery sensor like the
built-in streams, once ``SENTINEL_STREAM_MODULES`` names the payments module.
"""

import dagster as dg
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame
from pyspark.sql.types import DoubleType, StringType, StructField, StructType

from sentinel_platform.domains.shared.common import IO_MANAGER_KEY
from sentinel_platform.domains.shared.publish import publish_asset
from sentinel_platform_tests.harness.third_stream.payments import PAYMENTS, REVIEW_ABOVE

PAYMENT_SCHEMA = StructType(
    [
        StructField("id", StringType(), False),
        StructField("payer", StringType(), False),
        StructField("amount", DoubleType(), False),
        StructField("currency", StringType(), False),
    ]
)
CURRENCIES = ("EUR", "USD", "GBP")


class PaymentsConfig(dg.Config):
    """How many payments one run publishes, and the prefix of their ids."""

    rows: int = 12
    id_prefix: str = "pay"


def payment_rows(rows: int, id_prefix: str) -> list[tuple[str, str, float, str]]:
    """``rows`` payments: ids ``<prefix>-0000``..., every third one above the review limit."""
    return [
        (
            f"{id_prefix}-{n:04d}",
            f"payer-{n % 5}",
            REVIEW_ABOVE + 250.0 if n % 3 == 0 else round(10 + n * 1.25, 2),
            CURRENCIES[n % len(CURRENCIES)],
        )
        for n in range(rows)
    ]


@dg.asset(group_name="payments", io_manager_key=IO_MANAGER_KEY, kinds={"spark", "parquet"})
def payments(config: PaymentsConfig, pyspark: PySparkResource) -> DataFrame:
    """Payments built by Spark: the stream's own transformation, stored as Parquet."""
    spark = pyspark.spark_session
    return spark.createDataFrame(payment_rows(config.rows, config.id_prefix), PAYMENT_SCHEMA)


#: The publish asset, in the stream's concurrency pool, from the platform's one factory.
payment_stream = publish_asset(
    PAYMENTS,
    payments,
    group_name="payments",
    description="Payments on stream `payments`, published by the executors.",
)

publish_payments = dg.define_asset_job(PAYMENTS.publish_job, selection=[payments, payment_stream])

defs = dg.Definitions(assets=[payments, payment_stream], jobs=[publish_payments])
