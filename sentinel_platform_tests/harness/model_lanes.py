"""A worker of one or more models, as the model tests run it: the settings of each analyzer
role on a model API server (:mod:`~sentinel_platform_tests.harness.model_api_server`),
the transactions it decides, and what it wrote and served.

The live analyzer speaks OpenAI's API with :data:`LIVE_KEY`; a second analyzer (a role of
:mod:`sentinel_platform.settings.roles`: ``fallback``, ``shadow``) takes the same setting
names with its role after ``analyzer_`` (``analyzer_fallback_url``), as its
``SENTINEL_ANALYZER_<ROLE>_*`` variables do. :class:`ModelWorker` is one worker started
by the ``model_worker`` fixture, ready, its metrics served on a port of its own.
"""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.model_api_server import ModelApiServer
from sentinel_platform_tests.harness.processes import MODEL_NAMES, WorkerProcess
from sentinel_platform_tests.harness.waits import wait_until

#: The live model's key in :func:`live_settings` (never to reach the worker's output).
LIVE_KEY = "sk-live-0123456789abcdef"
#: A transaction as the generator writes it, less its id and label (:func:`transactions`).
TRANSACTION: dict[str, Any] = {
    "merchant": "Costco",
    "category": "grocery",
    "currency": "USD",
    "amount": 42.17,
    "message": "weekly shop",
    "source": "simulator",
    "timestamp": "2026-11-21T10:00:00Z",
}


def api_settings(api: str, server: ModelApiServer, **extra: Any) -> dict[str, Any]:
    """The analyzer's settings (field names) speaking ``api`` (``openai``, ``anthropic``)
    to ``server``, with its model from :data:`MODEL_NAMES`, and ``extra``."""
    base = server.url if api == "openai" else server.url.removesuffix("/v1")
    return {"analyzer_api": api, "analyzer_url": base, "analyzer_model": MODEL_NAMES[api], **extra}


def live_settings(server: ModelApiServer, **extra: Any) -> dict[str, Any]:
    """An OpenAI-style live model on ``server`` with :data:`LIVE_KEY`."""
    return api_settings("openai", server, analyzer_api_key=LIVE_KEY, **extra)


def role_settings(role: str, api: str, server: ModelApiServer, **extra: Any) -> dict[str, Any]:
    """:func:`api_settings` of the ``role`` analyzer: each name with ``role`` after
    ``analyzer_`` (``analyzer_fallback_api_key``)."""
    values = api_settings(api, server, **extra)
    return {name.replace("analyzer_", f"analyzer_{role}_", 1): v for name, v in values.items()}


def transactions(count: int) -> list[dict[str, Any]]:
    """``count`` generated transactions ``t-0``, ``t-1``, ...; the even ones labelled
    threats, the odd ones harmless."""
    return [{**TRANSACTION, "id": f"t-{i}", "is_threat": i % 2 == 0} for i in range(count)]


def scrape_samples(url: str) -> dict[str, float]:
    """Every sample of a Prometheus text page by name and labels (``name{a="b"}``)."""
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    return {
        line.rsplit(" ", 1)[0]: float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line and not line.startswith("#")
    }


def labels_of(sample: str) -> dict[str, str]:
    """The labels of a sample's key in :func:`scrape_samples` (values without escapes)."""
    inside = sample.partition("{")[2].removesuffix("}")
    pairs = (pair.split("=", 1) for pair in inside.split('",') if pair)
    return {name: value.strip('"') for name, value in pairs}


@dataclass
class ModelWorker:
    """One ready ``python -m workers.watch_transactions`` and the stream it decides."""

    process: WorkerProcess
    client: RedisClient
    keys: StreamKeys

    def publish(self, rows: Iterable[Mapping[str, Any]]) -> None:
        """Add each transaction of ``rows`` to the stream, as the producers do."""
        for row in rows:
            self.client.xadd(self.keys.stream, {"data": json.dumps(row)})

    def results(self, count: int | None = None, stream: str | None = None) -> list[dict[str, str]]:
        """The entries of the results stream (or ``stream``), once it holds ``count``."""
        key = stream or self.keys.results
        if count is not None:
            wait_until(lambda: self.client.xlen(key) >= count, timeout_s=60, what=key)
        return [dict(fields) for _, fields in self.client.xrange(key)]

    def decide(self, rows: list[dict[str, Any]]) -> list[dict[str, str]]:
        """Publish ``rows``, wait for a result of each, stop the worker cleanly and return
        the results."""
        self.publish(rows)
        results = self.results(len(rows))
        self.stop()
        return results

    def metrics(self, name: str, **labels: str) -> dict[str, float]:
        """The worker's samples of ``name`` whose labels include ``labels``, scraped now."""
        (serving,) = self.process.events("metrics_serving")
        return {
            sample: value
            for sample, value in scrape_samples(serving["url"]).items()
            if sample.partition("{")[0] == name and labels.items() <= labels_of(sample).items()
        }

    def metric(self, name: str, **labels: str) -> float:
        """The sum of :meth:`metrics` of ``name`` with ``labels`` (0 when none is served)."""
        return sum(self.metrics(name, **labels).values())

    def stop(self) -> None:
        """SIGTERM; the worker must exit 0 (everything it took committed)."""
        assert self.process.stop() == 0, self.process.tail()
