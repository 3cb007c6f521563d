"""The demo's own asset: a small batch of synthetic traffic published to the real streams.

The demo shows the platform alive (runs, lag, verdicts) without touching what a user's own
runs produce: it materialises ``demo_traffic`` (group *demo*), never the partitioned data
assets. Re-materialising today's partition of ``raw_transactions`` ... ``transaction_stream``
with a few hundred rows every few minutes made their row count flip between a real day's
20,000 and 200, which reads as data loss. The rows are built in memory by the same
generators, enrichment and scoring as the real assets, with the tick's own seed (so their
ids never collide with a real partition's), and published to the real streams through the
same backpressure-aware publisher, so workers, lag plots and alerts see real traffic.
"""

import dagster as dg
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sentinel_platform.domains.axioms.assets import to_axioms
from sentinel_platform.domains.shared.common import DAILY, partition_day
from sentinel_platform.domains.shared.generation import generate_telemetry, generate_transactions
from sentinel_platform.domains.shared.landing import CORRUPT
from sentinel_platform.domains.transactions.assets import enrich_transactions
from sentinel_platform.resources.redis_publisher import RedisPublisherResource
from sentinel_platform.resources.settings import SettingsResource
from sentinel_platform.streams.producer.publish import PublishStats

ASSET_NAME = "demo_traffic"
DEMO_GROUP = "demo"


class DemoTrafficConfig(dg.Config):
    """How much synthetic traffic one demo run publishes."""

    transactions: int = 200
    sources: int = 6
    readings_per_source: int = 48
    anomaly_rate: float = 0.1
    seed: int = 1000
    spark_partitions: int = 2


def _transactions(
    spark: SparkSession, config: DemoTrafficConfig, context: dg.AssetExecutionContext, high: float
) -> DataFrame:
    """Enriched transactions of the run's day, exactly as ``enriched_transactions`` builds them."""
    raw = generate_transactions(
        spark, partition_day(context), config.transactions, config.seed, config.spark_partitions
    ).withColumn(CORRUPT, F.lit(None).cast("string"))
    return enrich_transactions(raw, high)


def _axioms(
    spark: SparkSession, config: DemoTrafficConfig, context: dg.AssetExecutionContext
) -> DataFrame:
    """Scored anomalies of the run's day, exactly as ``axioms`` builds them."""
    readings = generate_telemetry(
        spark,
        partition_day(context),
        config.sources,
        config.readings_per_source,
        config.seed,
        config.spark_partitions,
        config.anomaly_rate,
    ).withColumn(CORRUPT, F.lit(None).cast("string"))
    return to_axioms(readings)


def _figures(kind: str, stats: PublishStats) -> dict[str, dg.MetadataValue]:
    return {
        f"{kind}_published": dg.MetadataValue.int(stats.rows),
        f"{kind}_paused_s": dg.MetadataValue.float(round(stats.paused_s, 3)),
    }


@dg.asset(
    name=ASSET_NAME,
    group_name=DEMO_GROUP,
    partitions_def=DAILY,
    kinds={"spark", "redis"},
    description="Demo only: a small batch of synthetic transactions and axioms published to "
    "the real streams (`transactions`, `synapse:axioms`) every few minutes by "
    "`demo_publish_schedule`. It materialises none of the data assets, so their row counts "
    "and partitions are only ever what your own runs made.",
)
def demo_traffic(
    context: dg.AssetExecutionContext,
    config: DemoTrafficConfig,
    pyspark: PySparkResource,
    settings: SettingsResource,
    redis_publisher: RedisPublisherResource,
) -> dg.MaterializeResult:
    """Publish the demo batch to both streams; the metadata says how much went where."""
    spark = pyspark.spark_session
    high = settings.load().high_risk_amount
    transactions = redis_publisher.publish_dataframe(
        _transactions(spark, config, context, high), "transactions", context.run_id
    )
    axioms = redis_publisher.publish_dataframe(
        _axioms(spark, config, context), "axioms", context.run_id
    )
    context.log.info(f"demo: published {transactions.rows} transactions and {axioms.rows} axioms")
    return dg.MaterializeResult(
        metadata={
            "dagster/row_count": dg.MetadataValue.int(transactions.rows + axioms.rows),
            "seed": dg.MetadataValue.int(config.seed),
            **_figures("transactions", transactions),
            **_figures("axioms", axioms),
        }
    )
