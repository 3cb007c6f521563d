"""The ``payments`` stream's Dagster side: its Spark source asset and its publish job.

The stream's spec names this module's ``defs`` (``StreamSpec.definitions``), so the
platform's own code location (``sentinel_platform.definitions``) merges them and gives
the stream the operations domain's health checks, lag gate and delivery sensor like the
built-in streams, once ``SENTINEL_STREAM_MODULES`` names the payments module.
"""

import dagster as dg
from dagster_pyspark import PySparkResource
from pyspark.sql.types import DoubleType, StringType, StructField, StructType

from sentinel_platform.domains.shared.common import publish_metadata
from sentinel_platform.resources.redis_publisher import RedisPublisherResource
from sentinel_platform_tests.third_stream.payments import PAYMENTS, REVIEW_ABOVE

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


@dg.asset(name=PAYMENTS.asset, group_name="payments", kinds={"spark", "redis"})
def payment_stream(
    context: dg.AssetExecutionContext,
    config: PaymentsConfig,
    pyspark: PySparkResource,
    redis_publisher: RedisPublisherResource,
) -> dg.MaterializeResult:
    """Payments built by Spark, published on stream `payments` by the executors."""
    spark = pyspark.spark_session
    df = spark.createDataFrame(payment_rows(config.rows, config.id_prefix), PAYMENT_SCHEMA)
    df = df.repartition(2)
    stats = redis_publisher.publish_dataframe(df, PAYMENTS.name, context.run_id)
    context.log.info(f"published {stats.rows} payments in {stats.wall_s:.1f}s")
    return dg.MaterializeResult(
        metadata=publish_metadata(
            stats, redis_publisher.stream_keys(PAYMENTS.name), PAYMENTS.name, df
        )
    )


publish_payments = dg.define_asset_job(PAYMENTS.publish_job, selection=[payment_stream])

defs = dg.Definitions(assets=[payment_stream], jobs=[publish_payments])
