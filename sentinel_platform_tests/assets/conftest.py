"""Fixtures for the publish-path tests: stream keys, a guard factory, a background setter,
the environment the publisher reads, and the data domains' resources."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, transaction_keys
from sentinel_platform.streams.producer.backpressure import BackpressureConfig, BackpressureGuard
from sentinel_platform_tests.domains.conftest import data_resources

__all__ = ["data_resources"]  # a fixture shared with the domain tests


@pytest.fixture
def txn_keys(settings: Settings) -> StreamKeys:
    return transaction_keys(settings)


@pytest.fixture
def make_guard(redis_client: RedisClient, txn_keys: StreamKeys) -> Callable[..., BackpressureGuard]:
    def factory(
        should_stop: Callable[[], bool] = lambda: False, **config: Any
    ) -> BackpressureGuard:
        # The guard's mechanics at Sentinel-L7's count limits (50 / 200), unless a test
        # passes lag_warn=None, lag_pause=None for the limits in seconds of work.
        values: dict[str, Any] = {
            "lag_warn": 50,
            "lag_pause": 200,
            "lag_pause_poll_ms": 20,
            "max_pause_s": 10.0,
        }
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
    """Settings whose REDIS_URL and SENTINEL_HOME are also in the environment, for the
    publisher resources these tests build without a settings resource."""
    return settings
