"""What the data assets share: the daily partitions, the publish selection and metadata."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date
from typing import Any

import dagster as dg
from pyspark.sql import DataFrame

from sentinel_platform.domains.operations.stream_health import EVICTION_CHECK
from sentinel_platform.registry import StreamSpec, spec_for
from sentinel_platform.resources.io_manager import column_schema
from sentinel_platform.resources.spark import session_metadata
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform.streams.producer.publish import PublishStats

#: One slice per day: the unit a user backfills or re-publishes.
DAILY = dg.DailyPartitionsDefinition(start_date="2026-01-01", end_offset=1)
IO_MANAGER_KEY = "parquet_io_manager"


def partition_day(context: dg.AssetExecutionContext) -> date:
    return date.fromisoformat(context.partition_key)


def daily_spark_asset(spec: StreamSpec) -> Callable[[Callable[..., Any]], dg.AssetsDefinition]:
    """The decorator of a daily Spark asset of stream ``spec``, stored as Parquet by the
    IO manager, in the group named after the stream (with its publish asset)."""
    return dg.asset(
        group_name=spec.name,
        partitions_def=DAILY,
        io_manager_key=IO_MANAGER_KEY,
        kinds={"spark", "parquet"},
    )


def publish_selection(group: str, stream_asset: dg.AssetsDefinition) -> dg.AssetSelection:
    """A group's assets and data-quality checks, without the stream-health checks that
    judge the consumers; with the one that judges the server (``EVICTION_CHECK``).

    Selecting a group also selects every check on its assets. The health checks on the
    stream asset (lag, DLQ, delivery counts) judge the consumers, not this run: run right
    after a publish they would see the backlog the run just created and, being blocking,
    fail it. The sensors and the checks schedule run them instead. The eviction check
    reads the server's policy, which a publish does not change, so it runs in the same
    run: otherwise the new materialisation leaves it "Not evaluated" until the next
    scheduled tick, minutes later.
    """
    eviction = dg.AssetCheckKey(stream_asset.key, EVICTION_CHECK)
    return (
        dg.AssetSelection.groups(group) - dg.AssetSelection.checks_for_assets(stream_asset)
    ) | dg.AssetSelection.checks(eviction)


def publish_figures(stats: PublishStats) -> dict[str, dg.MetadataValue]:
    """A publish's figures, each named for what it counts, so no two contradict.

    Every Spark partition publishes with its own guard, and the partitions wait at the
    same time: their waits summed can exceed the run's ``duration_s`` (a run of 61 s whose
    four partitions each paused 17 s read ``paused_s: 69``). The waits are shown per
    partition (the mean, never above ``duration_s``). The guard's episodes are named for
    what they are: ``pacing_episodes`` (the producer sent at the workers' drain rate
    because about a second of work was queued, which happens in the nominal zone) and
    ``pause_episodes`` (it stopped at the pause limit). A sharded stream's publish adds
    the rows each shard got (``shard_<k>_rows``): one asset, its shards in its metadata.
    """
    partitions = max(1, stats.partitions)
    return {
        "rows_published": dg.MetadataValue.int(stats.rows),
        "duration_s": dg.MetadataValue.float(round(stats.wall_s, 3)),
        "rows_per_s": dg.MetadataValue.float(round(stats.rows_per_s, 1)),
        "paused_s_per_partition": dg.MetadataValue.float(round(stats.paused_s / partitions, 3)),
        "slowed_s_per_partition": dg.MetadataValue.float(round(stats.slowed_s / partitions, 3)),
        "pacing_episodes": dg.MetadataValue.int(stats.soft_events),
        "pause_episodes": dg.MetadataValue.int(stats.hard_events),
        "max_lag_seen": dg.MetadataValue.int(stats.max_lag),
        **{
            f"shard_{k}_rows": dg.MetadataValue.int(rows)
            for k, rows in enumerate(stats.rows_per_shard)
        },
    }


def publish_metadata(
    stats: PublishStats, keys: StreamKeys, kind: str, published: DataFrame
) -> dict[str, dg.MetadataValue]:
    """A publish run's figures, the rows and wire columns it sent, and its Spark session."""
    wire = published.select(*spec_for(kind).columns)
    return {
        "dagster/row_count": dg.MetadataValue.int(stats.rows),
        "dagster/column_schema": dg.MetadataValue.table_schema(column_schema(wire.schema)),
        **session_metadata(published.sparkSession),
        "stream": dg.MetadataValue.text(keys.stream),
        **publish_figures(stats),
        "first_id": dg.MetadataValue.text(stats.first_id or ""),
        "last_id": dg.MetadataValue.text(stats.last_id or ""),
        "spark_partitions": dg.MetadataValue.int(stats.partitions),
        "executors": dg.MetadataValue.text(stats.executors),
    }
