"""In-process consumers against the real Redis server of the root conftest.

``make_consumer(...)`` builds the worker's own :class:`Consumer` (the code ``python -m
workers...`` runs) in this process, with the short recovery timings the worker-process
tests use, so a test drives it pass by pass (``start()`` then ``iteration()``) or until
nothing is left (``run(burst=True)``) and never waits for a process to start. Heartbeats
of consumers a test leaves running are stopped at the end.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sentinel_platform.settings import Settings
from sentinel_platform.streams.consumer.loop import Consumer
from sentinel_platform.streams.consumer.metrics import Metrics
from sentinel_platform.streams.consumer.processor import Processor
from sentinel_platform.streams.plumbing.connection import RedisClient, connect
from sentinel_platform.streams.plumbing.keys import StreamKeys, attempt_key_prefix, transaction_keys
from sentinel_platform_tests.harness.processes import FAST_TIMINGS, TEST_PROCESSOR
from workers.runtime import load_processor

#: ``FAST_TIMINGS`` of the worker-process tests, as settings field names.
FAST_SETTINGS: dict[str, Any] = {
    name.removeprefix("SENTINEL_").lower(): int(value) for name, value in FAST_TIMINGS.items()
}

MakeConsumer = Callable[..., Consumer]


def records_of(client: RedisClient, keys: StreamKeys, message_id: str) -> list[str]:
    """Keys holding attempt state of ``message_id`` (as a key of its own or as fields).

    Looked up without assuming the layout (one hash per message, or fields of a shared
    hash): whatever key or field names a message id is its record.
    """
    holders = []
    for key in client.scan_iter(match=f"{attempt_key_prefix(keys)}*"):
        fields: Any = client.hkeys(key) if client.type(key) == "hash" else []
        if key.endswith(message_id) or any(f.startswith(message_id) for f in fields):
            holders.append(key)
    return holders


@pytest.fixture
def fast_settings(make_settings: Callable[..., Settings]) -> Callable[..., Settings]:
    """Settings of the test server with short recovery timings; keyword overrides."""

    def factory(**overrides: Any) -> Settings:
        return make_settings(**{**FAST_SETTINGS, **overrides})

    return factory


@pytest.fixture
def tx_keys(settings: Settings) -> StreamKeys:
    return transaction_keys(settings)


@pytest.fixture
def make_consumer(
    redis_client: RedisClient, fast_settings: Callable[..., Settings]
) -> Iterator[MakeConsumer]:
    """Factory: ``make_consumer(name="c1", processor=TEST_PROCESSOR, keys_for=transaction_keys,
    count=None, wrap=None, stop=None, **settings_overrides)`` -> an in-process
    :class:`Consumer` (not started). ``processor`` is a ``module:factory`` spec, as on the
    worker's command line; ``wrap(processor)``, if given, is what the consumer calls."""
    made: list[tuple[Consumer, RedisClient]] = []

    def make(
        name: str = "c1",
        processor: str = TEST_PROCESSOR,
        keys_for: Callable[[Settings], StreamKeys] = transaction_keys,
        count: int | None = None,
        wrap: Callable[[Processor], Processor] | None = None,
        stop: threading.Event | None = None,
        **overrides: Any,
    ) -> Consumer:
        settings = fast_settings(**overrides)
        client = connect(settings)
        keys = keys_for(settings)
        built: Processor = load_processor(processor, settings)
        if wrap is not None:
            built = wrap(built)
        labels = {"stream": keys.stream, "group": keys.group, "consumer": name}
        metrics = Metrics(labels=labels)
        consumer = Consumer(client, keys, built, settings, name, metrics, stop, count=count)
        made.append((consumer, client))
        return consumer

    yield make
    for consumer, client in made:
        consumer.heartbeat.stop()
        client.close()


@pytest.fixture
def events(caplog: pytest.LogCaptureFixture) -> Callable[[str], list[logging.LogRecord]]:
    """``events(name)``: the structured log records of that event from the streams core."""
    caplog.set_level(logging.INFO, logger="sentinel_platform.streams")

    def named(name: str) -> list[logging.LogRecord]:
        return [r for r in caplog.records if r.getMessage() == name]

    return named
