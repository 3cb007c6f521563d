"""The demo's own asset: a small batch of synthetic traffic published to the real streams.

The demo shows the platform alive (runs, lag, verdicts) without touching what a user's own
runs produce: it materialises ``demo_traffic`` (group *demo*), never the partitioned data
assets. Re-materialising today's partition of ``raw_transactions`` ... ``transaction_stream``
with a few hundred rows every few minutes made their row count flip between a real day's
20,000 and 200, which reads as data loss. The rows are built in memory by the same
generators, enrichment and scoring as the real assets, with the tick's own seed (so their
ids never collide with a real partition's), and published to the real streams through the
same backpressure-aware publisher, so workers, lag plots and alerts see real traffic.
Every entry carries the demo's mark (:data:`~sentinel_platform.schemas.DEMO_FIELD`): the
workers answer it by the rules alone (the demo never spends a paid analyzer call), their
results keep the mark, and the reports and ``sentinel status``'s last publish leave it out
of the user's figures.

It is held like every other publish: the asset is two steps, one per stream, each in
that stream's concurrency pool (a step has one pool), so a demo run waits in the queue
while a user's run publishes either stream, and holds both pools while it runs (the
queue works at run granularity, see :mod:`sentinel_platform.cli.dagster_home`).
"""

from datetime import date
from typing import Any

import dagster as dg
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from sentinel_platform.domains.axioms.assets import to_axioms
from sentinel_platform.domains.shared.common import DAILY
from sentinel_platform.domains.shared.generation import generate_telemetry, generate_transactions
from sentinel_platform.domains.shared.landing import CORRUPT
from sentinel_platform.domains.transactions.assets import enrich_transactions
from sentinel_platform.registry import AXIOMS, TRANSACTIONS
from sentinel_platform.resources.redis_publisher import RedisPublisherResource
from sentinel_platform.resources.settings import SettingsResource
from sentinel_platform.streams.producer.publish import PublishStats

ASSET_NAME = "demo_traffic"
#: The asset's two steps: one per stream, each in that stream's publish pool.
TRANSACTIONS_OP = "demo_transactions"
AXIOMS_OP = "demo_axioms"
DEMO_GROUP = "demo"


class DemoTrafficConfig(dg.Config):
    """How much synthetic traffic one demo run publishes."""

    transactions: int = 200
    sources: int = 6
    readings_per_source: int = 48
    anomaly_rate: float = 0.1
    seed: int = 1000
    spark_partitions: int = 2


def _day(context: dg.OpExecutionContext) -> date:
    return date.fromisoformat(context.partition_key)


def _transactions(
    spark: SparkSession, config: DemoTrafficConfig, context: dg.OpExecutionContext, high: float
) -> DataFrame:
    """Enriched transactions of the run's day, exactly as ``enriched_transactions`` builds them."""
    raw = generate_transactions(
        spark, _day(context), config.transactions, config.seed, config.spark_partitions
    ).withColumn(CORRUPT, F.lit(None).cast("string"))
    return enrich_transactions(raw, high)


def _axioms(
    spark: SparkSession, config: DemoTrafficConfig, context: dg.OpExecutionContext
) -> DataFrame:
    """Scored anomalies of the run's day, exactly as ``axioms`` builds them."""
    readings = generate_telemetry(
        spark,
        _day(context),
        config.sources,
        config.readings_per_source,
        config.seed,
        config.spark_partitions,
        config.anomaly_rate,
    ).withColumn(CORRUPT, F.lit(None).cast("string"))
    return to_axioms(readings)


def demo_figures(kind: str, stats: PublishStats) -> dict[str, float]:
    """The rows published and the seconds paused per Spark partition (the partitions wait
    at the same time, so their sum can exceed the run's duration), as floats: Dagster
    type-checks the step output passed between the steps."""
    paused = stats.paused_s / max(1, stats.partitions)
    return {
        f"{kind}_published": float(stats.rows),
        f"{kind}_paused_s_per_partition": round(paused, 3),
    }


@dg.op(name=TRANSACTIONS_OP, pool=TRANSACTIONS.pool)
def demo_transactions(
    context: dg.OpExecutionContext,
    config: DemoTrafficConfig,
    pyspark: PySparkResource,
    settings: SettingsResource,
    redis_publisher: RedisPublisherResource,
) -> dict[str, float]:
    """Publish the demo's transactions (the transactions stream's pool); their figures."""
    high = settings.load().high_risk_amount
    frame = _transactions(pyspark.spark_session, config, context, high)
    stats = redis_publisher.publish_dataframe(frame, TRANSACTIONS.name, context.run_id, demo=True)
    return demo_figures(TRANSACTIONS.name, stats)


@dg.op(name=AXIOMS_OP, pool=AXIOMS.pool, out=dg.Out(dg.Nothing))
def demo_axioms(
    context: dg.OpExecutionContext,
    config: DemoTrafficConfig,
    pyspark: PySparkResource,
    redis_publisher: RedisPublisherResource,
    transactions: dict[str, float],
) -> None:
    """Publish the demo's axioms (the axioms stream's pool); the asset's metadata: both."""
    frame = _axioms(pyspark.spark_session, config, context)
    stats = redis_publisher.publish_dataframe(frame, AXIOMS.name, context.run_id, demo=True)
    figures = {**transactions, **demo_figures(AXIOMS.name, stats)}
    rows = int(figures["transactions_published"] + figures["axioms_published"])
    context.log.info(
        f"demo: published {int(figures['transactions_published'])} transactions "
        f"and {stats.rows} axioms"
    )
    context.add_output_metadata(
        {
            "dagster/row_count": dg.MetadataValue.int(rows),
            "seed": dg.MetadataValue.int(config.seed),
            **{
                name: dg.MetadataValue.int(int(value))
                if name.endswith("_published")
                else dg.MetadataValue.float(value)
                for name, value in figures.items()
            },
        }
    )


@dg.graph_asset(
    name=ASSET_NAME,
    group_name=DEMO_GROUP,
    partitions_def=DAILY,
    kinds={"spark", "redis"},
    description="Demo only: a small batch of synthetic transactions and axioms published to "
    "the real streams (`transactions`, `synapse:axioms`) every few minutes by "
    "`demo_publish_schedule`. It materialises none of the data assets, so their row counts "
    "and partitions are only ever what your own runs made.",
)
def demo_traffic() -> Any:
    """Publish the demo batch to both streams, each step in its stream's publish pool."""
    return demo_axioms(demo_transactions())
