"""The simulator's truth as the real worker treats it: ``python -m workers.watch_transactions``
deciding generated transactions that carry their label (``is_threat``), against a real
HTTP server for each analyzer API (the platform's own ``sentinel`` contract, OpenAI Chat
Completions, Anthropic Messages) and a real Redis.

What is promised: no request body the worker sends carries the label, as a field or as
text anywhere in what the model is shown of the transaction; and every result entry keeps
it beside the verdict, as ``label``, for measurement (absent when the message has none).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from sentinel_platform_tests.harness.analyzer_server import AnalyzerServer
from sentinel_platform_tests.harness.model_api_server import ModelApiServer
from sentinel_platform_tests.harness.model_lanes import ModelWorker, api_settings

#: Rows as the generator writes them: a labelled threat, a labelled harmless payment, and
#: one from a source with no truth (no ``is_threat`` at all).
GENERATED: tuple[dict[str, Any], ...] = (
    {
        "id": "txn-20261121-2a-00000001",
        "merchant": "RapidRemit",
        "category": "suspicious",
        "currency": "USD",
        "amount": 497.5,
        "message": "Gift card reload - send asap",
        "is_threat": True,
        "source": "simulator",
        "timestamp": "2026-11-21T08:15:30.123Z",
    },
    {
        "id": "txn-20261121-2a-00000002",
        "merchant": "Costco Wholesale",
        "category": "retail",
        "currency": "USD",
        "amount": 120.4,
        "message": "Weekly groceries",
        "is_threat": False,
        "source": "simulator",
        "timestamp": "2026-11-21T08:16:00.000Z",
    },
    {
        "id": "txn-20261121-2a-00000003",
        "merchant": "Kim's Convenience",
        "category": "grocery",
        "currency": "CAD",
        "amount": 7.25,
        "message": "Milk and bread",
        "source": "partner-feed",
        "timestamp": "2026-11-21T08:17:00.000Z",
    },
)
EXPECTED_LABELS = {"txn-20261121-2a-00000001": "true", "txn-20261121-2a-00000002": "false"}


def shown_to_model(api: str, body: dict[str, Any]) -> str:
    """The text of a request that carries the transaction (not the instructions or the
    verdict schema, which name the answer's own ``is_threat`` field)."""
    if api == "sentinel":
        return json.dumps(body)
    if api == "openai":
        return json.dumps([m for m in body["messages"] if m["role"] != "system"])
    return json.dumps(body["messages"])


def assert_label_kept(results: list[dict[str, str]]) -> None:
    assert {r["driver_used"] for r in results} == {"analyzer"}, results
    labels = {r["txn_id"]: r.get("label") for r in results}
    assert labels == {**EXPECTED_LABELS, "txn-20261121-2a-00000003": None}


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_model_api_never_sees_the_label_and_the_verdict_keeps_it(
    api: str,
    model_api_server: ModelApiServer,
    model_worker: Callable[..., ModelWorker],
) -> None:
    results = model_worker(**api_settings(api, model_api_server)).decide([*GENERATED])
    bodies = [request["body"] for request in model_api_server.seen()]
    assert len(bodies) == len(GENERATED), "one call per message"
    for body in bodies:
        shown = shown_to_model(api, body)
        assert "is_threat" not in shown, shown
        assert "merchant" in shown, "the transaction itself is shown"
    assert_label_kept(results)


def test_the_sentinel_api_never_sees_the_label_and_the_verdict_keeps_it(
    analyzer_server: AnalyzerServer,
    model_worker: Callable[..., ModelWorker],
) -> None:
    results = model_worker(analyzer_url=analyzer_server.url).decide([*GENERATED])
    bodies = [request["body"] for request in analyzer_server.requests]
    assert len(bodies) == len(GENERATED), "one call per message"
    for body in bodies:
        assert set(body["payload"]) == {
            "id",
            "merchant",
            "category",
            "currency",
            "amount",
            "message",
            "source",
            "timestamp",
        }
        assert "is_threat" not in json.dumps(body), body
    assert_label_kept(results)
