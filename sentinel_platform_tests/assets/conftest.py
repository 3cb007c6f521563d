"""Fixtures for the Spark/data area: stream keys, a guard factory, a background setter."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sentinel_platform.settings import Settings
from sentinel_platform.streams.backpressure import BackpressureConfig, BackpressureGuard
from sentinel_platform.streams.connection import RedisClient
from sentinel_platform.streams.keys import StreamKeys, transaction_keys


@pytest.fixture
def txn_keys(settings: Settings) -> StreamKeys:
    return transaction_keys(settings)


@pytest.fixture
def make_guard(redis_client: RedisClient, txn_keys: StreamKeys) -> Callable[..., BackpressureGuard]:
    def factory(
        should_stop: Callable[[], bool] = lambda: False, **config: Any
    ) -> BackpressureGuard:
        values: dict[str, Any] = {"lag_pause_poll_ms": 20, "max_pause_s": 10.0}
        values.update(config)
        return BackpressureGuard(
            redis_client, txn_keys, BackpressureConfig(**values), should_stop=should_stop
        )

    return factory


@pytest.fixture
def later() -> Iterator[Callable[[float, Callable[[], Any]], None]]:
    """Run ``action`` after ``delay`` seconds on a thread (joined at teardown)."""
    threads: list[threading.Thread] = []

    def schedule(delay: float, action: Callable[[], Any]) -> None:
        def run() -> None:
            time.sleep(delay)
            action()

        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        threads.append(thread)

    yield schedule
    for thread in threads:
        thread.join(timeout=10)


@pytest.fixture
def data_settings(settings: Settings, settings_env: dict[str, str]) -> Settings:
    """Settings whose REDIS_URL and SENTINEL_HOME are also in the environment the assets read."""
    return settings


def resources_on(settings: Settings, base_uri: str | None) -> dict[str, Any]:
    """The definitions' resources on the test Redis (Spark: the test session).

    The IO manager stores under ``base_uri``; ``None`` leaves it to the settings the
    environment names at run time, as in the deployed definitions.
    """
    from sentinel_platform.resources.io_manager import SparkParquetIOManager
    from sentinel_platform.resources.redis_publisher import RedisPublisherResource
    from sentinel_platform.resources.spark import spark_resource

    pyspark = spark_resource(settings)
    return {
        "pyspark": pyspark,
        "redis_publisher": RedisPublisherResource(
            redis_url=settings.redis_url_value, max_pause_s=20
        ),
        "parquet_io_manager": SparkParquetIOManager(pyspark=pyspark, base_uri=base_uri),
    }


@pytest.fixture
def data_resources(data_settings: Settings, spark: Any) -> dict[str, Any]:
    """The definitions' resources, pointed at the test Redis and home (Spark: the test session)."""
    return resources_on(data_settings, data_settings.data_uri)
