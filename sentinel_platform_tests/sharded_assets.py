"""The three-shard stream's Dagster side: a Spark source of generated transactions and its
publish asset from the platform's one factory, merged into the code location through
``StreamSpec.definitions`` (``test_sharded_stream.py``)."""

from datetime import date

import dagster as dg
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame

from sentinel_platform.domains.shared.common import IO_MANAGER_KEY
from sentinel_platform.domains.shared.generation import generate_transactions
from sentinel_platform.domains.shared.publish import publish_asset
from sentinel_platform_tests.sharded_stream import SHARDED

DAY = date(2026, 11, 28)


class ShardedSourceConfig(dg.Config):
    """How many transactions one run publishes."""

    rows: int = 300


@dg.asset(group_name="sharded", io_manager_key=IO_MANAGER_KEY, kinds={"spark", "parquet"})
def sharded_source(config: ShardedSourceConfig, pyspark: PySparkResource) -> DataFrame:
    """Generated transactions, in three Spark partitions."""
    return generate_transactions(pyspark.spark_session, DAY, config.rows, seed=5, partitions=3)


sharded_stream_asset = publish_asset(
    SHARDED,
    sharded_source,
    group_name="sharded",
    description="Transactions on the three shards of stream `sharded`, routed by their id.",
)

publish_sharded = dg.define_asset_job(
    SHARDED.publish_job, selection=[sharded_source, sharded_stream_asset]
)

defs = dg.Definitions(assets=[sharded_source, sharded_stream_asset], jobs=[publish_sharded])
