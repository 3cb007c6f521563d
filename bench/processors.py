"""Processors for benchmarks and drills: ``--processor bench.processors:<factory>``.

A bench message is ``{"k": <natural key>, ...}``. ``noop`` measures the consumer
machinery alone; ``counting`` also counts every call of ``process`` in Redis (hash
``bench:calls``, one field per natural key), so a drill can tell a duplicate
*processing* (the processor ran twice) from a duplicate *effect* (two result entries).
``counting`` also understands two markers used by the chaos drills: a message with an
``invalid`` field fails validation (dead-lettered at once), one with a ``poison`` field
raises on every delivery (dead-lettered after the delivery limit).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from sentinel_platform.schemas import SchemaError
from sentinel_platform.settings import Settings
from sentinel_platform.streams.connection import RedisClient, connect
from sentinel_platform.streams.processor import Effect

CALLS_KEY = "bench:calls"
MODEL = "BenchMessage"


class NoopProcessor:
    """Validates the one field it needs and produces a one-field result."""

    name = "bench"

    def parse(self, fields: Mapping[str, str]) -> dict[str, str]:
        key = fields.get("k")
        if not isinstance(key, str) or not key:
            raise SchemaError(MODEL, "k", "field is missing")
        if "invalid" in fields:
            raise SchemaError(MODEL, "invalid", "message marked invalid")
        return dict(fields)

    def natural_key(self, message: dict[str, str]) -> str:
        return message["k"]

    def process(self, message: dict[str, str]) -> Effect:
        return Effect(natural_key=message["k"], result={"k": message["k"]})


class CountingProcessor(NoopProcessor):
    """Counts every processing in Redis; raises on poison messages."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._client: RedisClient | None = None
        self._pid = str(os.getpid())

    @property
    def client(self) -> RedisClient:
        if self._client is None:
            self._client = connect(self._settings)
        return self._client

    def process(self, message: dict[str, str]) -> Effect:
        key = message["k"]
        self.client.hincrby(CALLS_KEY, key, 1)
        if "poison" in message:
            raise RuntimeError(f"poison message {key}")
        return Effect(natural_key=key, result={"k": key, "pid": self._pid})


def noop(settings: Settings) -> NoopProcessor:
    return NoopProcessor()


def counting(settings: Settings) -> CountingProcessor:
    return CountingProcessor(settings)
