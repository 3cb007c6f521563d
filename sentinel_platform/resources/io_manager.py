"""Parquet IO manager for Spark DataFrames, stored under a URI any Spark cluster can reach.

Each asset lives at ``<base>/<asset/key/path>`` and each daily partition at
``.../<partition key>``, where ``<base>`` is ``SENTINEL_DATA_DIR`` (``file://``,
``hdfs://``, ``s3a://``, ``abfss://``, ...). Spark writes and reads it on the executors,
so nothing is collected to the driver; existence checks go through Hadoop's FileSystem
(:class:`~sentinel_platform.resources.hadoop_fs.HadoopFs`), never the driver's disk.

The session always comes from the configured ``pyspark`` resource, in every step that
loads or stores a DataFrame: a bare ``getOrCreate()`` would start an unconfigured
session (another master, another time zone) in any step that does not ask for the
resource itself.

Every partition has its own path and a write replaces only that path, so a step that
writes several partitions (a single-run backfill) leaves all others alone. Such an
output carries the partition of each row in :data:`PARTITION_COLUMN`; loading several
partitions adds that column back.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import dagster as dg
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from sentinel_platform.resources.hadoop_fs import HadoopFs
from sentinel_platform.resources.settings import SettingsResource, settings_or_environment
from sentinel_platform.resources.spark import session_metadata
from sentinel_platform.settings import redact_url
from sentinel_platform.storage_uri import as_uri, join

#: Column naming each row's partition when one output or input spans several partitions.
PARTITION_COLUMN = "partition_key"
_DAGSTER_TYPES = {
    "bigint": "int",
    "int": "int",
    "smallint": "int",
    "tinyint": "int",
    "double": "float",
    "float": "float",
    "boolean": "bool",
}


class MissingUpstreamPartitionError(dg.Failure):
    """An input's stored partition does not exist: say which, and what to materialise first."""

    def __init__(self, asset: str, partition: str | None, uri: str) -> None:
        what = f"partition {partition} of asset {asset!r}" if partition else f"asset {asset!r}"
        select = f"--select {asset}" + (f" --partition {partition}" if partition else "")
        super().__init__(
            description=f"missing upstream data: {what} was never materialised (nothing at "
            f"{redact_url(uri)}); materialise it first, e.g. `dagster asset materialize "
            f"-m sentinel_platform.definitions {select}`, then re-run this step",
            allow_retries=False,
        )


class MultiPartitionOutputError(ValueError):
    """An output spanning several partitions lacks the column that says which row is which."""


def column_schema(schema: StructType) -> dg.TableSchema:
    """A Spark schema as Dagster's table schema (shown as the asset's columns)."""
    return dg.TableSchema(
        columns=[
            dg.TableColumn(
                f.name,
                _DAGSTER_TYPES.get(f.dataType.simpleString(), f.dataType.simpleString()),
                constraints=dg.TableColumnConstraints(nullable=f.nullable),
            )
            for f in schema.fields
        ]
    )


def stored_metadata(spark: SparkSession, uri: str, rows: int, schema: StructType) -> dict[str, Any]:
    """What the UI shows for a stored DataFrame: rows, columns, where, and which session."""
    return {
        "dagster/row_count": dg.MetadataValue.int(rows),
        "dagster/column_schema": dg.MetadataValue.table_schema(column_schema(schema)),
        "path": dg.MetadataValue.path(redact_url(uri)),
        **session_metadata(spark),
    }


class SparkParquetIOManager(dg.ConfigurableIOManager):
    """Stores Spark DataFrame outputs as Parquet under ``base_uri`` (default: the settings'
    data directory)."""

    pyspark: PySparkResource
    base_uri: str | None = None
    settings: SettingsResource | None = None

    def _root(self) -> str:
        if self.base_uri:
            return as_uri(self.base_uri)
        return settings_or_environment(self.settings).load().data_uri

    def _asset_uri(self, context: dg.OutputContext | dg.InputContext) -> str:
        return join(self._root(), *context.asset_key.path)

    @staticmethod
    def _keys(context: dg.OutputContext | dg.InputContext) -> Sequence[str]:
        return list(context.asset_partition_keys) if context.has_asset_partitions else []

    def handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        if obj is None:
            return
        spark = self.pyspark.spark_session
        base, keys = self._asset_uri(context), self._keys(context)
        if len(keys) > 1:
            uris = self._write_partitions(obj, base, keys, context.asset_key.to_user_string())
            schema = obj.drop(PARTITION_COLUMN).schema
        else:
            uris = [join(base, keys[0]) if keys else base]
            obj.write.mode("overwrite").parquet(uris[0])
            schema = obj.schema
        rows = spark.read.parquet(*uris).count()  # from the Parquet footers, not a recompute
        context.add_output_metadata(
            stored_metadata(spark, uris[0] if len(uris) == 1 else base, rows, schema)
        )

    @staticmethod
    def _write_partitions(df: DataFrame, base: str, keys: Sequence[str], asset: str) -> list[str]:
        if PARTITION_COLUMN not in df.columns:
            raise MultiPartitionOutputError(
                f"asset {asset!r} writes {len(keys)} partitions in one step, so its DataFrame "
                f"needs a {PARTITION_COLUMN!r} column naming each row's partition"
            )
        uris = []
        computed = df.persist()  # computed once, then sliced per partition
        try:
            for key in keys:
                uri = join(base, key)
                part = computed.where(F.col(PARTITION_COLUMN) == key).drop(PARTITION_COLUMN)
                part.write.mode("overwrite").parquet(uri)
                uris.append(uri)
        finally:
            computed.unpersist()
        return uris

    def load_input(self, context: dg.InputContext) -> Any:
        spark = self.pyspark.spark_session
        fs = HadoopFs(spark)
        base, keys = self._asset_uri(context), self._keys(context)
        asset = context.asset_key.to_user_string()
        if len(keys) > 1:
            return self._load_partitions(spark, fs, base, keys, asset)
        uri = join(base, keys[0]) if keys else base
        if not fs.exists(uri):
            raise MissingUpstreamPartitionError(asset, keys[0] if keys else None, uri)
        return spark.read.parquet(uri)

    @staticmethod
    def _load_partitions(
        spark: SparkSession, fs: HadoopFs, base: str, keys: Sequence[str], asset: str
    ) -> DataFrame:
        """The stored partitions among ``keys`` (missing days are skipped, not fatal)."""
        present = [join(base, key) for key in keys if fs.exists(join(base, key))]
        if not present:
            raise MissingUpstreamPartitionError(asset, f"{keys[0]}...{keys[-1]}", base)
        directory = F.regexp_extract(F.col("_metadata.file_path"), r"/([^/]+)/[^/]+$", 1)
        return spark.read.parquet(*present).withColumn(PARTITION_COLUMN, directory)
