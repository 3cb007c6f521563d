"""A shadow that keeps pace with the live path, as users run it: ``python -m
workers.watch_transactions`` on the default concurrency (``auto``), the live model's and
the shadow's servers real HTTP servers on 127.0.0.1, and a real Redis.

What is promised: with the shadow asked about every message (fraction 1), every message
gets exactly one shadow verdict and none is dropped, however many calls at once the live
path runs (a trial that silently measures a subset would need tuning); and a message whose
live call was answered busy (429 with ``Retry-After``: called again later) is offered to
the shadow once, when its live call is made, not once per attempt.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from typing import Any

from sentinel_platform_tests.harness.model_api_bodies import RATE_LIMITED, shown_message
from sentinel_platform_tests.harness.model_api_server import ModelApiServer, Scripted
from sentinel_platform_tests.harness.model_lanes import (
    ModelWorker,
    live_settings,
    role_settings,
    transactions,
)
from sentinel_platform_tests.harness.waits import wait_until
from workers.analyzer.lanes.shadow_record import shadow_results_key

#: Published at once: far more than a few threads of a 50 ms shadow serve while the live
#: path, dozens of calls at once, decides them all.
MANY = 400
SERVICE_S = 0.05
DROPPED = "sentinel_worker_shadow_dropped_total"


def shadow_of_all(live: ModelApiServer, shadow: ModelApiServer, **extra: Any) -> dict:
    """An OpenAI-style live model and shadow, the shadow asked about every message."""
    trial = role_settings("shadow", "openai", shadow, analyzer_api_key="sk-shadow-0123456789")
    return {**live_settings(live), **trial, "analyzer_shadow_fraction": 1.0, **extra}


def asked_about(server: ModelApiServer) -> Counter[str]:
    """How many times ``server`` was asked about each transaction id."""
    return Counter(str(shown_message(a["body"]).get("id")) for a in server.seen())


def settled(worker: ModelWorker, count: int) -> Callable[[], bool]:
    """Whether ``count`` shadow verdicts are written or dropped."""
    key = shadow_results_key(worker.keys)
    return lambda: worker.client.xlen(key) + worker.metric(DROPPED) >= count


def test_on_the_default_concurrency_every_message_gets_one_shadow_verdict(
    model_api_server: ModelApiServer,
    serve_model_api: Callable[[], ModelApiServer],
    model_worker: Callable[..., ModelWorker],
) -> None:
    shadow_server = serve_model_api()
    model_api_server.latency_s = shadow_server.latency_s = SERVICE_S
    worker = model_worker(
        **shadow_of_all(model_api_server, shadow_server, worker_concurrency="auto")
    )
    worker.publish(transactions(MANY))
    worker.results(MANY)
    wait_until(settled(worker, MANY), timeout_s=60, what="every shadow verdict written or dropped")
    dropped = {k: v for k, v in worker.metrics(DROPPED).items() if v}
    shadows = worker.results(stream=shadow_results_key(worker.keys))
    worker.stop()
    assert dropped == {}, "the shadow kept up: nothing dropped"
    expected = Counter(f"t-{i}" for i in range(MANY))
    assert Counter(s["txn_id"] for s in shadows) == expected
    assert asked_about(shadow_server) == expected


def test_a_message_answered_busy_is_offered_to_the_shadow_once(
    model_api_server: ModelApiServer,
    serve_model_api: Callable[[], ModelApiServer],
    model_worker: Callable[..., ModelWorker],
) -> None:
    messages = 9
    refuse = {f"t-{i}" for i in range(0, messages, 3)}
    refused: set[str] = set()
    busy = Scripted(429, {"retry-after": "1"}, json.dumps(RATE_LIMITED).encode())

    def first_call_busy(number: int) -> Scripted | None:
        txn_id = str(shown_message(model_api_server.seen()[number]["body"]).get("id"))
        if txn_id in refuse and txn_id not in refused:
            refused.add(txn_id)
            return busy
        return None

    model_api_server.script = first_call_busy
    shadow_server = serve_model_api()
    worker = model_worker(**shadow_of_all(model_api_server, shadow_server))
    worker.publish(transactions(messages))
    live = worker.results(messages)
    wait_until(settled(worker, messages), timeout_s=30, what="every shadow verdict")
    worker.stop()
    assert refused == refuse, "each of them was answered busy first"
    assert [r["driver_used"] for r in live] == ["analyzer"] * messages, live
    expected = Counter(f"t-{i}" for i in range(messages))
    assert asked_about(shadow_server) == expected, "the shadow asked once a message"
    shadows = worker.results(stream=shadow_results_key(worker.keys))
    assert Counter(s["txn_id"] for s in shadows) == expected
