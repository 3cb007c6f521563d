"""Interrupting a Spark publish that executors are holding back (a Dagster run termination)."""

from __future__ import annotations

import os
import signal
import threading
import time
from typing import Any

import pytest

from sentinel_platform.resources.redis_publisher import PublishError, RedisPublisherResource
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform.streams.producer.partition_publisher import PUBLISHER_CLIENT_PREFIX
from sentinel_platform.streams.producer.publish import TRANSACTION_COLUMNS, stop_key
from sentinel_platform_tests.harness.waits import wait_until

pytestmark = pytest.mark.spark
ROW = (
    "t-1",
    "Costco Wholesale",
    "retail",
    "USD",
    10.5,
    "ok",
    False,
    "test",
    "2026-11-21T00:00:00Z",
)
#: Sentinel-L7's count limits: a published lag key past them holds the producers.
L7_LIMITS = {"lag_warn": 50, "lag_pause": 200}
SCHEMA = (
    "id string, merchant string, category string, currency string, amount double, "
    "message string, is_threat boolean, source string, timestamp string"
)


def _publishers(client: RedisClient) -> list[dict]:
    """Executor-side publisher connections still open (their Python code still running).

    Spark's own view is not enough: a cancelled stage looks finished while its Python
    worker may still be inside a backpressure wait.
    """
    return [c for c in client.client_list() if c["name"].startswith(PUBLISHER_CLIENT_PREFIX)]


def test_interrupting_the_driver_stops_waiting_executors_within_a_second(
    spark: Any, data_settings: Settings, redis_client: RedisClient
) -> None:
    keys = transaction_keys(data_settings)
    redis_client.set(keys.lag, 999)  # past Sentinel-L7's hard limit: executors wait
    df = spark.createDataFrame([ROW, ROW], SCHEMA).repartition(2).select(*TRANSACTION_COLUMNS)
    publisher = RedisPublisherResource(
        redis_url=data_settings.redis_url_value,
        max_pause_s=120,
        lag_pause_poll_ms=30_000,
        **L7_LIMITS,
    )
    sent_at: list[float] = []

    def interrupt() -> None:
        # Both partitions connected and read the lag: they are in their backpressure wait.
        wait_until(lambda: len(_publishers(redis_client)) == 2, timeout_s=60)
        time.sleep(0.3)
        sent_at.append(time.monotonic())
        os.kill(os.getpid(), signal.SIGINT)  # what a run termination delivers to the step

    threading.Thread(target=interrupt, daemon=True).start()
    with pytest.raises(KeyboardInterrupt):
        publisher.publish_dataframe(df, "transactions", run_id="run-x")
    # The driver stops waiting at once; a missed interrupt would wait out the 30 s poll.
    assert time.monotonic() - sent_at[0] < 3.0
    assert redis_client.exists(stop_key(keys, "run-x"))
    wait_until(lambda: not _publishers(redis_client), timeout_s=10)
    # Slices of 0.25 s plus a round trip; generous for a loaded machine, far below the poll.
    assert time.monotonic() - sent_at[0] < 5.0, "executors kept waiting after the interrupt"
    assert redis_client.xlen(keys.stream) == 0


def test_max_pause_on_executors_fails_the_publish_with_the_executor_message(
    spark: Any, data_settings: Settings, redis_client: RedisClient
) -> None:
    keys = transaction_keys(data_settings)
    redis_client.set(keys.lag, 777)
    df = spark.createDataFrame([ROW], SCHEMA).select(*TRANSACTION_COLUMNS)
    publisher = RedisPublisherResource(
        redis_url=data_settings.redis_url_value, max_pause_s=0.5, **L7_LIMITS
    )
    with pytest.raises(PublishError) as raised:
        publisher.publish_dataframe(df, "transactions", run_id="run-y")
    message = str(raised.value)
    assert "BackpressureTimeout" in message and "stream 'transactions'" in message
    assert "lag 777" in message and "SENTINEL_MAX_PAUSE_S" in message
    assert redis_client.xlen(keys.stream) == 0
