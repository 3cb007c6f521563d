"""Reading landing files with an enforced schema, so bad rows are caught, not guessed at.

Files live under ``SENTINEL_HOME/landing/<feed>/``; a sub-directory named for a day
(``landing/transactions/2026-11-21/``) holds that day's partition, otherwise the files
directly in the feed directory are used for any day. CSV (with header), JSON lines and
Parquet are read with the feed's schema. A CSV/JSON row that does not fit keeps its raw
text in ``_corrupt_record`` instead of being dropped, so the data-quality check can show
it; a Parquet file missing a required (non-nullable in the feed schema) column fails with
the file and column named.
"""

from __future__ import annotations

from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StringType, StructField, StructType

CORRUPT = "_corrupt_record"
FORMATS = {".csv": "csv", ".json": "json", ".jsonl": "json", ".ndjson": "json"}
PARQUET = ".parquet"


class LandingError(ValueError):
    """Landing files exist but cannot be read with the feed's schema."""


def landing_files(feed_dir: Path, day: str | None) -> list[Path]:
    """The data files for ``day`` (its sub-directory if present, else the feed's own files)."""
    if not feed_dir.is_dir():
        return []
    chosen = feed_dir / day if day and (feed_dir / day).is_dir() else feed_dir
    suffixes = {*FORMATS, PARQUET}
    return sorted(p for p in chosen.iterdir() if p.is_file() and p.suffix.lower() in suffixes)


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


def read_landing(spark: SparkSession, files: list[Path], schema: StructType) -> DataFrame:
    """``files`` as one DataFrame: ``schema`` plus ``_corrupt_record`` and ``_source_file``."""
    frames = []
    by_format: dict[str, list[str]] = {}
    for path in files:
        by_format.setdefault(FORMATS.get(path.suffix.lower(), "parquet"), []).append(str(path))
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
