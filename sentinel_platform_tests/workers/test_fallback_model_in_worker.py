"""A second model before the rules, as users run it: ``python -m workers.watch_transactions``
with ``SENTINEL_ANALYZER_*`` naming an OpenAI-style server and
``SENTINEL_ANALYZER_FALLBACK_*`` an Anthropic-style one, both real HTTP servers on
127.0.0.1, and a real Redis.

What is promised: once the first model answers ``insufficient_quota`` (exhausted), the
second decides every later message, its verdicts marked ``analyzer_role=fallback``, with
its own model and tokens, and none provisional; a busy first model (429 with
``Retry-After``) is waited for and never falls through; with both models down the rules
decide, provisionally, as they do with one. The worker's analyzer metrics tell the two
models apart (``role="primary"``, ``role="fallback"``): an operator sees a fallback that
is itself failing.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from sentinel_platform_tests.harness.model_api_bodies import (
    ANTHROPIC_MODEL,
    OPENAI_MODEL,
    RATE_LIMITED,
)
from sentinel_platform_tests.harness.model_api_server import ModelApiServer, Scripted
from sentinel_platform_tests.harness.model_lanes import (
    ModelWorker,
    live_settings,
    role_settings,
    transactions,
)

MESSAGES = 6
QUOTA_AFTER = 2
FALLBACK_KEY = "sk-ant-fallback-0123456789"
CALLS = "sentinel_worker_analyzer_calls_total"


def with_fallback(primary: ModelApiServer, second: ModelApiServer) -> dict[str, Any]:
    """The settings of an OpenAI-style live model and an Anthropic-style fallback."""
    fallback = role_settings("fallback", "anthropic", second, analyzer_api_key=FALLBACK_KEY)
    return {**live_settings(primary), **fallback}


def test_the_fallback_model_decides_once_the_first_is_exhausted(
    model_api_server: ModelApiServer,
    serve_model_api: Callable[[], ModelApiServer],
    model_worker: Callable[..., ModelWorker],
) -> None:
    second = serve_model_api()
    model_api_server.quota_after = QUOTA_AFTER
    worker = model_worker(**with_fallback(model_api_server, second))
    worker.publish(transactions(MESSAGES))
    results = worker.results(MESSAGES)
    assert worker.metric(CALLS, role="fallback", outcome="ok") == MESSAGES - QUOTA_AFTER
    assert worker.metric(CALLS, role="primary", outcome="ok") == QUOTA_AFTER
    tokens = worker.metric(
        "sentinel_worker_analyzer_tokens_total", role="fallback", model=ANTHROPIC_MODEL
    )
    assert tokens > 0, "the fallback's tokens are its own"
    worker.stop()
    assert len({r["txn_id"] for r in results}) == MESSAGES == len(results)
    assert all(r["driver_used"] == "analyzer" for r in results), results
    assert all("provisional" not in r and "fallback_cause" not in r for r in results), results
    roles = sorted((r["analyzer_role"], r["model"]) for r in results)
    assert roles == sorted(
        [("primary", OPENAI_MODEL)] * QUOTA_AFTER
        + [("fallback", ANTHROPIC_MODEL)] * (MESSAGES - QUOTA_AFTER)
    )
    fallback_calls = [r for r in second.seen() if r.get("status") == 200]
    assert len(fallback_calls) == MESSAGES - QUOTA_AFTER
    assert all(c["path"] == "/v1/messages" for c in fallback_calls)
    assert all(c["headers"].get("x-api-key") == FALLBACK_KEY for c in fallback_calls)


def test_the_metrics_show_a_fallback_model_that_is_failing_too(
    model_api_server: ModelApiServer,
    serve_model_api: Callable[[], ModelApiServer],
    model_worker: Callable[..., ModelWorker],
) -> None:
    second = serve_model_api()
    model_api_server.quota_after = QUOTA_AFTER
    second.down = True  # the fallback gone away: the rules decide the rest
    values = {**with_fallback(model_api_server, second), "analyzer_fallback_timeout_s": "2"}
    worker = model_worker(**values)
    worker.publish(transactions(MESSAGES))
    results = worker.results(MESSAGES)
    failed = MESSAGES - QUOTA_AFTER
    assert [r["driver_used"] for r in results].count("fallback") == failed, results
    primary = {o: worker.metric(CALLS, role="primary", outcome=o) for o in ("ok", "exhausted")}
    assert primary == {"ok": QUOTA_AFTER, "exhausted": failed}
    fallback = {o: worker.metric(CALLS, role="fallback", outcome=o) for o in ("ok", "error")}
    assert fallback == {"ok": 0, "error": failed}, "every call of the fallback failed"
    exhausted = "sentinel_worker_analyzer_exhausted"
    assert (
        worker.metric(exhausted, role="primary"),
        worker.metric(exhausted, role="fallback"),
    ) == (
        1,
        0,
    )
    worker.stop()


def test_a_busy_first_model_is_waited_for_and_never_falls_through(
    model_api_server: ModelApiServer,
    serve_model_api: Callable[[], ModelApiServer],
    model_worker: Callable[..., ModelWorker],
) -> None:
    second = serve_model_api()
    busy = Scripted(429, {"retry-after": "1"}, json.dumps(RATE_LIMITED).encode())
    model_api_server.script = lambda n: busy if n < 2 else None
    worker = model_worker(**with_fallback(model_api_server, second))
    results = worker.decide(transactions(MESSAGES))
    assert [r["analyzer_role"] for r in results] == ["primary"] * MESSAGES, results
    assert any(r.get("status") == 429 for r in model_api_server.seen()), "it was busy"
    assert second.seen() == [], "a busy first model waits: the fallback is not asked"


def test_both_models_down_the_rules_decide_provisionally(
    model_api_server: ModelApiServer,
    serve_model_api: Callable[[], ModelApiServer],
    model_worker: Callable[..., ModelWorker],
) -> None:
    second = serve_model_api()
    model_api_server.down = second.down = True
    values = with_fallback(model_api_server, second)
    values["analyzer_timeout_s"] = values["analyzer_fallback_timeout_s"] = "2"
    results = model_worker(**values).decide(transactions(MESSAGES))
    assert all(r["driver_used"] == "fallback" for r in results), results
    assert all(r.get("provisional") == "true" for r in results), results
    assert all("analyzer_role" not in r for r in results), "no model decided"
