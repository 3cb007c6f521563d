"""Parquet IO manager for Spark DataFrames under ``SENTINEL_HOME/data``.

Each asset is stored at ``<data_dir>/<asset/key/path>`` and each daily partition at
``.../<partition key>``; Spark writes and reads it on the executors, so nothing is
collected to the driver. Overwriting one partition leaves the others alone, which is
what a backfill of one day needs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg

from sentinel_platform.settings import load_settings


class SparkParquetIOManager(dg.ConfigurableIOManager):
    """Stores Spark DataFrame outputs as Parquet; ``base_dir`` defaults to settings' data dir."""

    base_dir: str | None = None

    def _root(self) -> Path:
        return Path(self.base_dir) if self.base_dir else load_settings().data_dir

    def _path(self, context: dg.OutputContext | dg.InputContext) -> Path:
        path = self._root().joinpath(*context.asset_key.path)
        if context.has_asset_partitions:
            keys = context.asset_partition_keys
            if len(keys) == 1:
                return path / keys[0]
        return path

    def handle_output(self, context: dg.OutputContext, obj: Any) -> None:
        if obj is None:
            return
        path = self._path(context)
        obj.write.mode("overwrite").parquet(str(path))
        context.add_output_metadata({"path": dg.MetadataValue.path(str(path))})

    def load_input(self, context: dg.InputContext) -> Any:
        from pyspark.sql import SparkSession

        spark = SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()
        path = self._path(context)
        if context.has_asset_partitions and len(context.asset_partition_keys) > 1:
            paths = [str(path / key) for key in context.asset_partition_keys]
            return spark.read.parquet(*[p for p in paths if Path(p).exists()])
        return spark.read.parquet(str(path))
