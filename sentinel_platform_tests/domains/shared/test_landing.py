"""Landing files are read with the feed's schema; misfits are kept, not dropped."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
from pyspark.sql import functions as F

from sentinel_platform.domains.shared.common import DAILY
from sentinel_platform.domains.shared.landing import (
    CORRUPT,
    LandingError,
    day_rows,
    landing_files,
    read_landing,
)
from sentinel_platform.domains.transactions.assets import LANDING_SCHEMA
from sentinel_platform.storage_uri import name_of

pytestmark = pytest.mark.spark
GOOD = {
    "id": "t-1",
    "merchant": "Costco Wholesale",
    "category": "retail",
    "currency": "USD",
    "amount": 10.5,
    "message": "ok",
    "is_threat": False,
    "source": "pos",
    "timestamp": "2026-11-20T10:00:00Z",
}


def test_day_directory_wins_over_the_feed_directory(spark: Any, tmp_path: Path) -> None:
    (tmp_path / "2026-11-20").mkdir()
    (tmp_path / "2026-11-20" / "a.jsonl").write_text("{}\n")
    (tmp_path / "all.csv").write_text("id\n")
    (tmp_path / "notes.txt").write_text("ignored")
    feed = tmp_path.as_uri()
    (day_file,) = landing_files(spark, feed, "2026-11-20")
    assert day_file.startswith("file:") and day_file.endswith("/2026-11-20/a.jsonl")
    assert [name_of(u) for u in landing_files(spark, feed, "2026-11-21")] == ["all.csv"]
    assert landing_files(spark, f"{feed}/missing", "2026-11-20") == []


def test_a_parquet_directory_written_by_spark_counts_as_one_landing_file(
    spark: Any, tmp_path: Path
) -> None:
    spark.createDataFrame([GOOD]).write.parquet(str(tmp_path / "day.parquet"))
    (files,) = [landing_files(spark, tmp_path.as_uri(), None)]
    assert [name_of(u) for u in files] == ["day.parquet"]
    (row,) = read_landing(spark, files, LANDING_SCHEMA).collect()
    assert row["id"] == "t-1"


def test_json_lines_keep_a_misfit_row_as_corrupt_record(spark: Any, tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    bad = '{"id": "t-2", "amount": "ten dollars"}'
    path.write_text(json.dumps(GOOD) + "\n" + bad + "\n")
    rows = {r["id"]: r for r in read_landing(spark, [path.as_uri()], LANDING_SCHEMA).collect()}
    assert rows["t-1"]["amount"] == 10.5 and rows["t-1"][CORRUPT] is None
    assert rows["t-2"][CORRUPT] == bad


def test_parquet_is_cast_to_the_schema_and_missing_columns_are_named(
    spark: Any, tmp_path: Path
) -> None:
    good = tmp_path / "good.parquet"
    spark.createDataFrame([GOOD]).write.parquet(str(good))
    (row,) = read_landing(spark, [good.as_uri()], LANDING_SCHEMA).collect()
    assert row["amount"] == 10.5 and row["timestamp"] == GOOD["timestamp"]
    assert row["_source_file"].startswith("part-")

    partial = tmp_path / "partial.parquet"
    spark.createDataFrame([{"id": "t-9"}]).write.parquet(str(partial))
    with pytest.raises(LandingError, match=r"partial\.parquet: missing column\(s\) merchant"):
        read_landing(spark, [partial.as_uri()], LANDING_SCHEMA)


def _day_rows_of(spark: Any, feed: Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The output metadata and rows of a source asset built on :func:`day_rows`."""

    @dg.asset(partitions_def=DAILY)
    def source(context) -> Any:  # type: ignore[no-untyped-def]  # Dagster cannot read a postponed one
        return day_rows(
            context,
            spark,
            feed.as_uri(),
            LANDING_SCHEMA,
            generate=lambda: spark.createDataFrame([{**GOOD, "id": "generated"}]),
            generated={"seed": 7},
            landed=lambda df: df.withColumn("message", F.lit("landed")),
        )

    result = dg.materialize(
        [source], partition_key="2026-11-20", resources={"io_manager": dg.InMemoryIOManager()}
    )
    (event,) = result.asset_materializations_for_node("source")
    metadata = {name: value.value for name, value in event.metadata.items()}
    return metadata, [row.asDict() for row in result.output_for_node("source").collect()]


def test_day_rows_are_the_landing_files_when_present_else_generated(
    spark: Any, tmp_path: Path
) -> None:
    metadata, rows = _day_rows_of(spark, tmp_path)
    assert metadata == {"origin": "generated", "seed": 7}
    assert [(row["id"], row[CORRUPT]) for row in rows] == [("generated", None)]

    (tmp_path / "t.jsonl").write_text(json.dumps(GOOD) + "\n")
    metadata, rows = _day_rows_of(spark, tmp_path)
    assert metadata["origin"] == "landing" and metadata["files"][0].endswith("/t.jsonl")
    assert [(row["id"], row["message"]) for row in rows] == [("t-1", "landed")]
    assert "_source_file" not in rows[0]
