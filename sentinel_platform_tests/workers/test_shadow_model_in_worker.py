"""A model on trial in shadow, as users run it: ``python -m workers.watch_transactions``
with ``SENTINEL_ANALYZER_*`` naming the live model's server and
``SENTINEL_ANALYZER_SHADOW_*`` the trial's, both real HTTP servers on 127.0.0.1, and a
real Redis.

What is promised: the shadow is asked about the messages its fraction chooses (by natural
key) and writes each verdict to ``<results>:shadow`` with the message's ``txn_id``,
``label``, model, prompt version and tokens, ``shadow_of`` the message; it never decides
(every live verdict is the live model's); the live verdicts never wait for it (all are
written while a slow shadow has answered nothing); and the shadow's quota running out holds
the shadow alone, never the live model. The worker's analyzer metrics count the shadow's
calls apart (``role="shadow"``), and the verdicts it dropped by reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from sentinel_platform_tests.harness.model_api_bodies import ANTHROPIC_MODEL, OPENAI_MODEL
from sentinel_platform_tests.harness.model_api_server import ModelApiServer
from sentinel_platform_tests.harness.model_lanes import (
    ModelWorker,
    live_settings,
    role_settings,
    transactions,
)
from sentinel_platform_tests.harness.waits import wait_until
from workers.analyzer.lanes.shadow import chosen
from workers.analyzer.lanes.shadow_record import shadow_results_key

MESSAGES = 8
FRACTION = 0.5
SHADOW_KEY = "sk-shadow-0123456789abcdef"
CALLS = "sentinel_worker_analyzer_calls_total"
DROPPED = "sentinel_worker_shadow_dropped_total"


def with_shadow(live: ModelApiServer, api: str, shadow: ModelApiServer, **extra: Any) -> dict:
    """The settings of an OpenAI-style live model and a shadow speaking ``api``."""
    trial = role_settings("shadow", api, shadow, analyzer_api_key=SHADOW_KEY)
    return {**live_settings(live), **trial, **extra}


def test_the_shadow_is_asked_about_its_fraction_and_writes_beside_the_live_verdicts(
    model_api_server: ModelApiServer,
    serve_model_api: Callable[[], ModelApiServer],
    model_worker: Callable[..., ModelWorker],
) -> None:
    shadow_server = serve_model_api()
    picked = {f"t-{i}" for i in range(MESSAGES) if chosen(f"t-{i}", FRACTION)}
    assert 0 < len(picked) < MESSAGES, "the table's keys choose some, not all"
    values = with_shadow(
        model_api_server, "anthropic", shadow_server, analyzer_shadow_fraction=FRACTION
    )
    worker = model_worker(**values)
    shadow_key = shadow_results_key(worker.keys)
    assert shadow_key == f"{worker.keys.results}:shadow"
    worker.publish(transactions(MESSAGES))
    live = worker.results(MESSAGES)
    shadows = worker.results(len(picked), stream=shadow_key)
    assert worker.metric(CALLS, role="shadow", outcome="ok") == len(picked)
    assert worker.metric(CALLS, role="primary", outcome="ok") == MESSAGES
    shadow_tokens = {"role": "shadow", "model": ANTHROPIC_MODEL}
    assert worker.metric("sentinel_worker_analyzer_tokens_total", **shadow_tokens) > 0
    assert worker.metric(DROPPED) == 0
    worker.stop()
    assert {(r["driver_used"], r["analyzer_role"], r["model"]) for r in live} == {
        ("analyzer", "primary", OPENAI_MODEL)
    }, "the shadow never decides"
    assert {s["txn_id"] for s in shadows} == picked
    for entry in shadows:
        assert entry["shadow_of"] == entry["txn_id"]
        assert entry["label"] == ("true" if int(entry["txn_id"][2:]) % 2 == 0 else "false")
        assert (entry["analyzer_role"], entry["model"]) == ("shadow", ANTHROPIC_MODEL)
        assert entry["prompt_version"] and int(entry["input_tokens"]) > 0
        assert entry["risk_level"] == "medium"
    asked = shadow_server.seen()
    assert len(asked) == len(picked)
    assert all(a["headers"]["x-api-key"] == SHADOW_KEY for a in asked)
    assert SHADOW_KEY not in worker.process.text()


def test_the_live_verdicts_never_wait_for_a_slow_shadow(
    model_api_server: ModelApiServer,
    serve_model_api: Callable[[], ModelApiServer],
    model_worker: Callable[..., ModelWorker],
) -> None:
    shadow_server = serve_model_api()
    shadow_server.latency_s = 30.0  # far beyond the whole live run
    worker = model_worker(**with_shadow(model_api_server, "openai", shadow_server))
    worker.publish(transactions(MESSAGES))
    live = worker.results(MESSAGES)
    assert not any("status" in a for a in shadow_server.seen()), "all live before any shadow"
    wait_until(lambda: len(shadow_server.seen()) >= 1, timeout_s=30)  # it was asked
    assert worker.results(stream=shadow_results_key(worker.keys)) == []
    assert all(r["analyzer_role"] == "primary" for r in live)
    worker.stop()


def test_the_shadows_spent_quota_never_holds_the_live_model(
    model_api_server: ModelApiServer,
    serve_model_api: Callable[[], ModelApiServer],
    model_worker: Callable[..., ModelWorker],
) -> None:
    shadow_server = serve_model_api()
    shadow_server.quota_after = 0  # every shadow call: 429 insufficient_quota
    worker = model_worker(**with_shadow(model_api_server, "openai", shadow_server))
    worker.publish(transactions(MESSAGES))
    live = worker.results(MESSAGES)
    wait_until(lambda: any(a.get("status") == 429 for a in shadow_server.seen()), timeout_s=30)
    wait_until(lambda: worker.metric(DROPPED, reason="failed") == MESSAGES, timeout_s=30)
    assert worker.metric(CALLS, role="shadow", outcome="exhausted") == MESSAGES
    assert worker.metric(CALLS, role="primary", outcome="ok") == MESSAGES
    exhausted = "sentinel_worker_analyzer_exhausted"
    assert (worker.metric(exhausted, role="shadow"), worker.metric(exhausted, role="primary")) == (
        1,
        0,
    )
    worker.stop()
    assert [r["driver_used"] for r in live] == ["analyzer"] * MESSAGES, live
    assert all("provisional" not in r for r in live)
    assert len([a for a in model_api_server.seen() if a.get("status") == 200]) == MESSAGES
    assert worker.results(stream=shadow_results_key(worker.keys)) == []
