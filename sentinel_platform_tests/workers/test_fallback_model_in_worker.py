"""A second model before the rules, as users run it: ``python -m workers.watch_transactions``
with ``SENTINEL_ANALYZER_*`` naming an OpenAI-style server and
``SENTINEL_ANALYZER_FALLBACK_*`` an Anthropic-style one, both real HTTP servers on
127.0.0.1, and a real Redis.

What is promised: once the first model answers ``insufficient_quota`` (exhausted), the
second decides every later message, its verdicts marked ``analyzer_role=fallback``, with
its own model and tokens, and none provisional; a busy first model (429 with
``Retry-After``) is waited for and never falls through; with both models down the rules
decide, provisionally, as they do with one.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.harness.model_api_bodies import (
    ANTHROPIC_MODEL,
    OPENAI_MODEL,
    RATE_LIMITED,
)
from sentinel_platform_tests.harness.model_api_server import (
    ModelApiServer,
    Scripted,
    serving_model_api,
)
from sentinel_platform_tests.harness.waits import wait_until
from sentinel_platform_tests.workers import test_model_apis_in_worker as model_apis
from sentinel_platform_tests.workers.test_model_apis_in_worker import (
    MESSAGES,
    Start,
    api_settings,
    entries,
)

start_shim = model_apis.start_shim  # the fixture: ``python -m workers.watch_<stream>``

QUOTA_AFTER = 2


@pytest.fixture
def second_server() -> Iterator[ModelApiServer]:
    with serving_model_api() as server:
        yield server


def with_fallback(primary: ModelApiServer, second: ModelApiServer) -> dict[str, str]:
    """The settings of an OpenAI-style live model and an Anthropic-style fallback."""
    fallback = api_settings("anthropic", second)
    return {
        **api_settings("openai", primary, analyzer_api_key="sk-live-0123456789abcdef"),
        **{k.replace("analyzer_", "analyzer_fallback_", 1): v for k, v in fallback.items()},
        "analyzer_fallback_api_key": "sk-ant-fallback-0123456789",
    }


def run(start: Start, client: RedisClient, settings: Settings, **values: str) -> list[dict]:
    """Every result of :data:`MESSAGES` transactions through one worker with ``values``."""
    keys = transaction_keys(settings)
    worker = start("transactions", **values)
    worker.wait_ready(client, timeout_s=60)
    for fields in entries("transactions"):
        client.xadd(keys.stream, fields)
    wait_until(lambda: client.xlen(keys.results) >= MESSAGES, timeout_s=60)
    assert worker.stop() == 0, worker.tail()
    return [result for _, result in client.xrange(keys.results)]


def test_the_fallback_model_decides_once_the_first_is_exhausted(
    model_api_server: ModelApiServer,
    second_server: ModelApiServer,
    start_shim: Start,
    settings: Settings,
    redis_client: RedisClient,
) -> None:
    model_api_server.quota_after = QUOTA_AFTER
    results = run(
        start_shim, redis_client, settings, **with_fallback(model_api_server, second_server)
    )
    assert len({r["txn_id"] for r in results}) == MESSAGES == len(results)
    assert all(r["driver_used"] == "analyzer" for r in results), results
    assert all("provisional" not in r and "fallback_cause" not in r for r in results), results
    roles = sorted((r["analyzer_role"], r["model"]) for r in results)
    assert roles == sorted(
        [("primary", OPENAI_MODEL)] * QUOTA_AFTER
        + [("fallback", ANTHROPIC_MODEL)] * (MESSAGES - QUOTA_AFTER)
    )
    fallback_calls = [r for r in second_server.seen() if r.get("status") == 200]
    assert len(fallback_calls) == MESSAGES - QUOTA_AFTER
    assert all(c["path"] == "/v1/messages" for c in fallback_calls)
    assert all(
        c["headers"].get("x-api-key") == "sk-ant-fallback-0123456789" for c in fallback_calls
    )


def test_a_busy_first_model_is_waited_for_and_never_falls_through(
    model_api_server: ModelApiServer,
    second_server: ModelApiServer,
    start_shim: Start,
    settings: Settings,
    redis_client: RedisClient,
) -> None:
    busy = Scripted(429, {"retry-after": "1"}, json.dumps(RATE_LIMITED).encode())
    model_api_server.script = lambda n: busy if n < 2 else None
    results = run(
        start_shim, redis_client, settings, **with_fallback(model_api_server, second_server)
    )
    assert [r["analyzer_role"] for r in results] == ["primary"] * MESSAGES, results
    assert any(r.get("status") == 429 for r in model_api_server.seen()), "it was busy"
    assert second_server.seen() == [], "a busy first model waits: the fallback is not asked"


def test_both_models_down_the_rules_decide_provisionally(
    model_api_server: ModelApiServer,
    second_server: ModelApiServer,
    start_shim: Start,
    settings: Settings,
    redis_client: RedisClient,
) -> None:
    model_api_server.down = second_server.down = True
    values = with_fallback(model_api_server, second_server)
    values["analyzer_timeout_s"] = values["analyzer_fallback_timeout_s"] = "2"
    results = run(start_shim, redis_client, settings, **values)
    assert all(r["driver_used"] == "fallback" for r in results), results
    assert all(r.get("provisional") == "true" for r in results), results
    assert all("analyzer_role" not in r for r in results), "no model decided"
