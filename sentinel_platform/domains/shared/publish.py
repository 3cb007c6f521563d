"""Every stream's publish asset, built from its registry spec by one factory.

A stream's publish asset takes the DataFrame its domain built (the asset named
``source``: enriched transactions, scored axioms, a deployment's own frame) and hands it
to the publisher resource, which writes it to the stream from the executors under
backpressure. Everything else about the asset comes from the stream's
:class:`~sentinel_platform.registry.StreamSpec`: its name (``spec.asset``), the stream it
writes (``spec.name``), and the Dagster concurrency **pool** of its step (``spec.pool``).
Each run publishes to one lane (:func:`~sentinel_platform.domains.shared.lane.lane_of_run`):
the stream itself, or for a past partition (or a run tagged ``sentinel/lane=batch``) the
stream's batch lane, unpaced; the materialisation's metadata say which and why.

The pool is why there is one factory. ``sentinel up`` limits each publish pool to one
slot in the instance's database and runs the queue at run granularity, so a run that
publishes a stream waits in the queue while another run publishing the same stream is in
progress, whoever launched either (the lag gate, a click on *Materialize*, an asset
backfill, the GraphQL API): Dagster reads the pool from the run's plan. An asset built
here cannot forget it, and the pool's name is derived in one place (the registry).

A daily stream of the code location's own domains also gets its publish job from here
(:func:`daily_publishing`): the job is named by ``spec.publish_job`` and selects the
stream's group (``spec.name``), so a new daily stream writes only its own transformation.
"""

from datetime import datetime, timezone
from typing import Any, NamedTuple

import dagster as dg
from pyspark.sql import DataFrame

from sentinel_platform.domains.shared.common import DAILY, publish_metadata, publish_selection
from sentinel_platform.domains.shared.lane import LaneChoice, lane_of_run
from sentinel_platform.registry import StreamSpec
from sentinel_platform.resources.redis_publisher import RedisPublisherResource
from sentinel_platform.streams.producer.lanes import lane_keys

#: The input under which the publish step receives the DataFrame it publishes.
FRAME_INPUT = "frame"


def publish_asset(
    spec: StreamSpec,
    source: str | dg.AssetsDefinition,
    *,
    group_name: str,
    description: str,
    partitions_def: dg.PartitionsDefinition | None = None,
) -> dg.AssetsDefinition:
    """The asset ``spec.asset``: the DataFrame of asset ``source`` published on the stream
    ``spec`` names, in the concurrency pool ``spec.pool``; its metadata are the publish
    figures (:func:`~sentinel_platform.domains.shared.common.publish_metadata`)."""
    source_key = source.key if isinstance(source, dg.AssetsDefinition) else dg.AssetKey(source)

    @dg.asset(
        name=spec.asset,
        ins={FRAME_INPUT: dg.AssetIn(key=source_key)},
        group_name=group_name,
        partitions_def=partitions_def,
        kinds={"spark", "redis"},
        pool=spec.pool,
        description=description,
    )
    def _publish(
        context: dg.AssetExecutionContext,
        frame: DataFrame,
        redis_publisher: RedisPublisherResource,
    ) -> dg.MaterializeResult:
        settings = redis_publisher.current_settings()
        partition = context.partition_key if context.has_partition_key else None
        choice = lane_of_run(settings, partition, context.run.tags, datetime.now(timezone.utc))
        if choice.warning:
            context.log.warning(choice.warning)
        context.log.info(f"publishing {spec.name} to the {choice.lane} lane: {choice.reason}")
        stats = redis_publisher.publish_dataframe(
            frame, spec.name, context.run_id, lane=choice.lane
        )
        context.log.info(
            f"published {stats.rows} {spec.name} in {stats.wall_s:.1f}s "
            f"({stats.rows_per_s:.0f} rows/s, paused {stats.paused_s:.1f}s)"
        )
        keys = lane_keys(redis_publisher.stream_keys(spec.name, settings), choice.lane)
        return dg.MaterializeResult(
            metadata={**publish_metadata(stats, keys, spec.name, frame), **lane_metadata(choice)}
        )

    return _publish


def lane_metadata(choice: LaneChoice) -> dict[str, dg.MetadataValue]:
    """Which lane a publish went to and why; a run tag that could not be followed is said
    (``lane_warning``), never dropped silently."""
    metadata: dict[str, dg.MetadataValue] = {
        "lane": dg.MetadataValue.text(choice.lane),
        "lane_reason": dg.MetadataValue.text(choice.reason),
    }
    if choice.warning:
        metadata["lane_warning"] = dg.MetadataValue.text(choice.warning)
    return metadata


class Publishing(NamedTuple):
    """A daily stream's publish asset and the job that builds, checks and publishes a day."""

    asset: dg.AssetsDefinition
    #: What ``dg.define_asset_job`` returns (Dagster exports no public name for its type).
    job: Any


def daily_publishing(
    spec: StreamSpec,
    source: dg.AssetsDefinition,
    *,
    description: str,
    job_description: str,
) -> Publishing:
    """The daily publish asset of ``spec`` (:func:`publish_asset` of ``source``) in the
    group named after the stream, and its job ``spec.publish_job``: the group's assets and
    data-quality checks for one day, then the publish
    (:func:`~sentinel_platform.domains.shared.common.publish_selection`)."""
    asset = publish_asset(
        spec, source, group_name=spec.name, partitions_def=DAILY, description=description
    )
    job = dg.define_asset_job(
        spec.publish_job,
        selection=publish_selection(spec.name, asset),
        partitions_def=DAILY,
        description=job_description,
    )
    return Publishing(asset, job)
