"""A partition published for the batch lane: the same entries, on the stream's batch lane,
never held by the live stream's backpressure."""

from __future__ import annotations

from typing import Any

import pytest

from sentinel_platform.resources.redis_publisher import RedisPublisherResource
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.progress import last_publish
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import batch_stream_key, transaction_keys
from sentinel_platform.streams.plumbing.replies import entries
from sentinel_platform.streams.producer.publish import TRANSACTION_COLUMNS
from sentinel_platform_tests.streams.producer.test_publish_interrupt import L7_LIMITS, ROW, SCHEMA

pytestmark = pytest.mark.spark


def _rows(prefix: str, count: int) -> list[tuple[Any, ...]]:
    return [(f"{prefix}-{n}", *ROW[1:]) for n in range(count)]


def test_the_batch_lane_gets_the_live_lanes_entries_past_the_pause_limit(
    spark: Any, data_settings: Settings, redis_client: RedisClient
) -> None:
    keys = transaction_keys(data_settings)
    publisher = RedisPublisherResource(
        redis_url=data_settings.redis_url_value,
        max_pause_s=1,
        lag_pause_poll_ms=50,
        lag_warn=L7_LIMITS["lag_warn"],
        lag_pause=L7_LIMITS["lag_pause"],
    )
    live = spark.createDataFrame(_rows("t", 6), SCHEMA).repartition(2)
    publisher.publish_dataframe(live.select(*TRANSACTION_COLUMNS), "transactions")
    live_fields = [fields for _id, fields in entries(redis_client.xrange(keys.stream))]
    redis_client.delete(keys.stream)
    # Past Sentinel-L7's hard limit: a real-time publish would wait, then time out.
    redis_client.set(keys.lag, 999)

    stats = publisher.publish_dataframe(
        live.select(*TRANSACTION_COLUMNS), "transactions", run_id="run-b", lane="batch"
    )

    batch = batch_stream_key(keys)
    assert stats.rows == 6 and stats.paused_s == 0 and stats.hard_events == 0
    assert redis_client.xlen(keys.stream) == 0
    batch_fields = [fields for _id, fields in entries(redis_client.xrange(batch))]
    key = lambda fields: fields["data"]  # noqa: E731 - one JSON field per transaction
    assert sorted(batch_fields, key=key) == sorted(live_fields, key=key)
    record = last_publish(redis_client, keys)  # what `sentinel status` shows
    assert record is not None and (record["lane"], record["rows"]) == ("batch", "6")
