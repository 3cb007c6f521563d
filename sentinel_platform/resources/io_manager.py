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

import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import dagster as dg
from dagster_pyspark import PySparkResource
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from sentinel_platform.registry import stream_specs
from sentinel_platform.resources.hadoop_fs import HadoopFs
from sentinel_platform.resources.settings import SettingsResource, settings_or_environment
from sentinel_platform.resources.spark import session_metadata
from sentinel_platform.settings import redact_url
from sentinel_platform.storage_uri import as_uri, join

#: Column naming each row's partition when one output or input spans several partitions.
PARTITION_COLUMN = "partition_key"
#: The code location the advice of :class:`MissingUpstreamPartitionError` loads.
DEFINITIONS_MODULE = "sentinel_platform.definitions"
_DAGSTER_TYPES = {
    "bigint": "int",
    "int": "int",
    "smallint": "int",
    "tinyint": "int",
    "double": "float",
    "float": "float",
    "boolean": "bool",
}


def rebuild_command(
    asset: str, partition: str, dagster_home: str | None, sentinel_home: str | None, dagster: str
) -> str:
    """The shell command that builds ``asset`` with everything upstream of it for
    ``partition``, recorded in the instance at ``dagster_home`` (the one the UI shows).

    ``--select '*asset'`` (the asset and every ancestor; ``+asset`` would add its parents
    only) and not the missing input alone: that input's own input is as likely missing (a
    fresh partition has none of them), so advice naming only it fails the same way one
    level up. The homes are spelled out because a shell without
    ``DAGSTER_HOME`` records into a throw-away instance the UI never shows, and one without
    ``SENTINEL_HOME`` reads another data directory. Paths only: no setting that may hold a
    secret (``REDIS_URL``) is ever written into the advice.
    """
    homes = [
        f"{name}={shlex.quote(value)}"
        for name, value in (("DAGSTER_HOME", dagster_home), ("SENTINEL_HOME", sentinel_home))
        if value
    ]
    argv = [
        shlex.quote(dagster),
        *("asset", "materialize", "-m", DEFINITIONS_MODULE),
        # quoted: a shell would expand the ``*``
        *("--select", f"'*{asset}'", "--partition", shlex.quote(partition)),
    ]
    return " ".join([*homes, *argv])


class MissingUpstreamPartitionError(dg.Failure):
    """An input's stored partition does not exist: say which, and give advice that works as
    written: the command that builds the step's asset with all of its upstream
    (:func:`rebuild_command`), or the publish job that does the same."""

    def __init__(
        self,
        asset: str,
        partition: str | None,
        uri: str,
        *,
        downstream: str | None = None,
        run_partition: str | None = None,
        command: str | None = None,
        job: str | None = None,
    ) -> None:
        what = f"partition {partition} of asset {asset!r}" if partition else f"asset {asset!r}"
        self.command = command
        target = downstream or asset
        if command:
            todo = f"build {target} with its upstream: `{command}`"
        else:
            where = f" for partition(s) {run_partition}" if run_partition else ""
            todo = f"materialise {target} with its upstream ({target} and all upstream){where}"
        if job:
            todo += f", or launch job {job} for partition {run_partition or partition}"
        super().__init__(
            description=f"missing upstream data: {what} was never materialised (nothing at "
            f"{redact_url(uri)}); {todo}",
            allow_retries=False,
        )


def publish_job_of(asset: str) -> str | None:
    """The publish job of the stream whose asset is ``asset`` (it builds the same graph)."""
    for spec in stream_specs():
        if spec.asset == asset:
            return spec.publish_job
    return None


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

    def stored_partition(self, asset: dg.AssetKey, partition: str) -> DataFrame | None:
        """The stored ``partition`` of ``asset`` as a lazy DataFrame, or None when it was
        never stored: for an asset that reads another's day beside its own inputs, where
        the day missing is not an error (read-only; Spark reads only the columns used)."""
        uri = join(self._root(), *asset.path, partition)
        spark = self.pyspark.spark_session
        return spark.read.parquet(uri) if HadoopFs(spark).exists(uri) else None

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
            raise self._missing(context, asset, keys[0] if keys else None, uri)
        return spark.read.parquet(uri)

    def _missing(
        self, context: dg.InputContext, asset: str, partition: str | None, uri: str
    ) -> MissingUpstreamPartitionError:
        """The error for a missing input, with advice for the step that needed it."""
        downstream = context.op_def.name
        run_partition = context.partition_key if context.has_partition_key else None
        command = None
        if run_partition is not None and "..." not in run_partition:
            home = settings_or_environment(self.settings).load().home_dir
            dagster = str(Path(sys.executable).parent / "dagster")
            command = rebuild_command(
                downstream, run_partition, context.instance.root_directory, str(home), dagster
            )
        return MissingUpstreamPartitionError(
            asset,
            partition,
            uri,
            downstream=downstream,
            run_partition=run_partition,
            command=command,
            job=publish_job_of(downstream),
        )

    @staticmethod
    def _load_partitions(
        spark: SparkSession, fs: HadoopFs, base: str, keys: Sequence[str], asset: str
    ) -> DataFrame:
        """The stored partitions among ``keys`` (missing days are skipped, not fatal)."""
        present = [join(base, key) for key in keys if fs.exists(join(base, key))]
        if not present:
            span = f"{keys[0]}...{keys[-1]}"
            raise MissingUpstreamPartitionError(asset, span, base, run_partition=span)
        directory = F.regexp_extract(F.col("_metadata.file_path"), r"/([^/]+)/[^/]+$", 1)
        return spark.read.parquet(*present).withColumn(PARTITION_COLUMN, directory)
