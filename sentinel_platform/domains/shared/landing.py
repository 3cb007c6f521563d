"""Reading landing files with an enforced schema, so bad rows are caught, not guessed at.

Files live under ``<landing root>/<feed>/`` (``SENTINEL_LANDING_DIR``, a URI on any
filesystem Hadoop serves, by default ``SENTINEL_HOME/landing``); a sub-directory named
for a day (``.../transactions/2026-11-21/``) holds that day's partition, otherwise the
files directly in the feed directory are used for any day. Listing goes through Hadoop's
FileSystem, so the driver finds what the executors will read. CSV (with header), JSON lines and
Parquet are read with the feed's schema. A CSV/JSON row that does not fit keeps its raw
text in ``_corrupt_record`` instead of being dropped, so the data-quality check can show
it; a Parquet file missing a required (non-nullable in the feed schema) column fails with
the file and column named.

Every stream's source asset takes the day's rows the same way (:func:`day_rows`): the
feed's landing files when there are any, else rows Spark generates, and says which in its
output metadata (``origin``); only the schema, the generator and the finishing of landed
rows are the stream's own.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import dagster as dg
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

from sentinel_platform.resources.hadoop_fs import HadoopFs
from sentinel_platform.storage_uri import join, suffix_of

CORRUPT = "_corrupt_record"
FORMATS = {".csv": "csv", ".json": "json", ".jsonl": "json", ".ndjson": "json"}
PARQUET = ".parquet"


class LandingError(ValueError):
    """Landing files exist but cannot be read with the feed's schema."""


def landing_files(spark: SparkSession, feed_uri: str, day: str | None) -> list[str]:
    """URIs of the data files for ``day`` (its sub-directory if present, else the feed's own).

    A Parquet data set written by Spark is a directory named ``*.parquet``; it counts as
    one file.
    """
    fs = HadoopFs(spark)
    if not fs.is_dir(feed_uri):
        return []
    day_uri = join(feed_uri, day) if day else None
    chosen = day_uri if day_uri and fs.is_dir(day_uri) else feed_uri
    suffixes = {*FORMATS, PARQUET}
    return [
        entry.uri
        for entry in fs.list(chosen)
        if suffix_of(entry.uri) in suffixes
        and (not entry.is_dir or suffix_of(entry.uri) == PARQUET)
    ]


def _read_text_files(
    spark: SparkSession, fmt: str, paths: list[str], schema: StructType
) -> DataFrame:
    # Text readers cannot enforce non-null; the data-quality check reports the nulls instead.
    fields = [StructField(f.name, f.dataType, True) for f in schema.fields]
    with_corrupt = StructType([*fields, StructField(CORRUPT, StringType(), True)])
    reader = (
        spark.read.schema(with_corrupt)
        .option("mode", "PERMISSIVE")
        .option("columnNameOfCorruptRecord", CORRUPT)
    )
    if fmt == "csv":
        return reader.option("header", True).option("enforceSchema", True).csv(paths)
    return reader.json(paths)


def _read_parquet(spark: SparkSession, paths: list[str], schema: StructType) -> DataFrame:
    frames = []
    for path in paths:
        df = spark.read.parquet(path)
        missing = [f.name for f in schema.fields if f.name not in df.columns]
        required = [m for m in missing if not schema[m].nullable]
        if required:
            raise LandingError(f"{path}: missing column(s) {', '.join(required)}")
        frames.append(
            df.select(
                *[
                    (F.col(f.name) if f.name in df.columns else F.lit(None))
                    .try_cast(f.dataType)
                    .alias(f.name)
                    for f in schema.fields
                ],
                F.lit(None).cast("string").alias(CORRUPT),
            )
        )
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result


def read_landing(spark: SparkSession, files: list[str], schema: StructType) -> DataFrame:
    """``files`` (URIs) as one DataFrame: ``schema`` plus ``_corrupt_record`` and
    ``_source_file``."""
    frames = []
    by_format: dict[str, list[str]] = {}
    for uri in files:
        by_format.setdefault(FORMATS.get(suffix_of(uri), "parquet"), []).append(str(uri))
    for fmt, paths in sorted(by_format.items()):
        df = (
            _read_parquet(spark, paths, schema)
            if fmt == "parquet"
            else _read_text_files(spark, fmt, paths, schema)
        )
        frames.append(df.withColumn("_source_file", F.col("_metadata.file_name")))
    result = frames[0]
    for frame in frames[1:]:
        result = result.unionByName(frame)
    return result


def day_rows(
    context: dg.AssetExecutionContext,
    spark: SparkSession,
    feed_uri: str,
    schema: StructType,
    *,
    generate: Callable[[], DataFrame],
    generated: Mapping[str, Any],
    landed: Callable[[DataFrame], DataFrame] = lambda df: df,
) -> DataFrame:
    """The partition's rows of the feed at ``feed_uri``.

    With landing files: ``landed`` of them as :func:`read_landing` reads them, without
    ``_source_file``, and output metadata ``origin: landing`` with the files. Without:
    ``generate()`` with a null ``_corrupt_record`` (the column every source carries for
    the quality check), and output metadata ``origin: generated`` plus ``generated``.
    """
    files = landing_files(spark, feed_uri, context.partition_key)
    if files:
        df = landed(read_landing(spark, files, schema))
        context.add_output_metadata({"origin": "landing", "files": files})
        return df.drop("_source_file")
    context.add_output_metadata({"origin": "generated", **generated})
    return generate().withColumn(CORRUPT, F.lit(None).cast("string"))
