"""A publish run goes to the lane its partition's urgency or its ``sentinel/lane`` tag
chooses: real Dagster runs (the tag on the run, as the UI's launch and backfill dialogs
set it) of the publish asset the factory builds, on real Spark and a real server."""

import json
from datetime import datetime, timezone
from typing import Any

import dagster as dg
import pytest
from pyspark.sql import DataFrame, SparkSession

from sentinel_platform.domains.shared.common import DAILY
from sentinel_platform.domains.shared.lane import LANE_TAG
from sentinel_platform.domains.shared.publish import publish_asset
from sentinel_platform.registry import TRANSACTIONS
from sentinel_platform.resources.redis_publisher import RedisPublisherResource
from sentinel_platform.resources.settings import SettingsResource
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import batch_stream_key, transaction_keys
from sentinel_platform.streams.plumbing.replies import entries
from sentinel_platform_tests.streams.producer.test_publish_interrupt import ROW, SCHEMA

pytestmark = [pytest.mark.spark, pytest.mark.dagster]
ROWS = 5
PAST = "2026-11-02"
OPENAI = {
    "analyzer_api": "openai",
    "analyzer_url": "http://127.0.0.1:9/v1",
    "analyzer_model": "gpt-4o-mini",
    "analyzer_batch_lane": "on",  # a local stand-in for the provider's batch endpoints
}


@dg.asset(partitions_def=DAILY, group_name="transactions")
def day_transactions(context: dg.AssetExecutionContext) -> DataFrame:
    """Five transactions of the partition's day, ids ``<day>-<n>``."""
    day = context.partition_key
    rows = [(f"{day}-{n}", *ROW[1:-1], f"{day}T12:00:00Z") for n in range(ROWS)]
    return SparkSession.builder.getOrCreate().createDataFrame(rows, SCHEMA)


PUBLISH = publish_asset(
    TRANSACTIONS,
    day_transactions,
    group_name="transactions",
    partitions_def=DAILY,
    description="The day's transactions.",
)


def _run(partition: str, overrides: dict[str, str], tags: dict[str, str]) -> dict[str, Any]:
    """Materialise ``partition`` in one run tagged ``tags``; the publish's metadata."""
    settings = SettingsResource(overrides=overrides)
    result = dg.materialize(
        [day_transactions, PUBLISH],
        partition_key=partition,
        tags=tags,
        resources={
            "io_manager": dg.InMemoryIOManager(),
            "settings": settings,
            "redis_publisher": RedisPublisherResource(settings=settings),
        },
    )
    (event,) = result.asset_materializations_for_node(PUBLISH.op.name)
    return {name: value.value for name, value in event.metadata.items()}


def _ids(client: RedisClient, stream: str) -> set[str]:
    return {json.loads(fields["data"])["id"] for _, fields in entries(client.xrange(stream))}


def test_runs_go_to_the_lane_their_tag_or_their_days_age_chooses(
    spark: Any, data_settings: Settings, redis_client: RedisClient
) -> None:
    keys = transaction_keys(data_settings)
    batch = batch_stream_key(keys)
    today = datetime.now(timezone.utc).date().isoformat()
    expected = {f"{day}-{n}" for day in (PAST, today) for n in range(ROWS)}

    tagged = _run(today, OPENAI, {LANE_TAG: "batch"})
    assert (tagged["lane"], tagged["stream"]) == ("batch", batch)
    assert f"{LANE_TAG}=batch" in tagged["lane_reason"]
    assert _ids(redis_client, batch) == {i for i in expected if i.startswith(today)}
    assert redis_client.xlen(keys.stream) == 0

    past = _run(PAST, OPENAI, {})
    assert past["lane"] == "batch" and "SENTINEL_ANALYZER_BATCH_AFTER_S" in past["lane_reason"]
    assert _ids(redis_client, batch) == expected
    assert redis_client.xlen(keys.stream) == 0

    fresh = _run(today, OPENAI, {})
    assert (fresh["lane"], fresh["stream"]) == ("realtime", keys.stream)
    assert _ids(redis_client, keys.stream) == {i for i in expected if i.startswith(today)}
    assert redis_client.xlen(batch) == 2 * ROWS


def test_a_batch_tag_without_a_batch_lane_is_said_and_published_real_time(
    spark: Any, data_settings: Settings, redis_client: RedisClient
) -> None:
    keys = transaction_keys(data_settings)
    own_api = {"analyzer_api": "sentinel", "analyzer_url": "http://127.0.0.1:9/analyze"}

    metadata = _run(PAST, own_api, {LANE_TAG: "batch"})

    assert metadata["lane"] == "realtime"
    assert "sentinel API has no batch lane" in metadata["lane_warning"]
    assert redis_client.xlen(keys.stream) == ROWS
    assert not redis_client.exists(batch_stream_key(keys))
