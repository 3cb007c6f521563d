"""A model on trial in shadow, as users run it: ``python -m workers.watch_transactions``
with ``SENTINEL_ANALYZER_*`` naming the live model's server and
``SENTINEL_ANALYZER_SHADOW_*`` the trial's, both real HTTP servers on 127.0.0.1, and a
real Redis.

What is promised: the shadow is asked about the messages its fraction chooses (by natural
key) and writes each verdict to ``<results>:shadow`` with the message's ``txn_id``,
``label``, model, prompt version and tokens, ``shadow_of`` the message; it never decides
(every live verdict is the live model's); the live verdicts never wait for it (all are
written while a slow shadow has answered nothing); and the shadow's quota running out holds
the shadow alone, never the live model.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.harness.model_api_bodies import ANTHROPIC_MODEL, OPENAI_MODEL
from sentinel_platform_tests.harness.model_api_server import ModelApiServer, serving_model_api
from sentinel_platform_tests.harness.waits import wait_until
from sentinel_platform_tests.workers import test_model_apis_in_worker as model_apis
from sentinel_platform_tests.workers.processors.test_transactions import BASE
from sentinel_platform_tests.workers.test_model_apis_in_worker import Start, api_settings
from workers.analyzer.lanes.shadow import chosen
from workers.analyzer.lanes.shadow_record import shadow_results_key

start_shim = model_apis.start_shim  # the fixture: ``python -m workers.watch_<stream>``

MESSAGES = 8
FRACTION = 0.5
SHADOW_KEY = "sk-shadow-0123456789abcdef"


@pytest.fixture
def shadow_server() -> Iterator[ModelApiServer]:
    with serving_model_api() as server:
        yield server


def with_shadow(live: ModelApiServer, api: str, shadow: ModelApiServer, **extra: Any) -> dict:
    """The settings of an OpenAI-style live model and a shadow speaking ``api``."""
    trial = api_settings(api, shadow, analyzer_api_key=SHADOW_KEY)
    return {
        **api_settings("openai", live, analyzer_api_key="sk-live-0123456789abcdef"),
        **{k.replace("analyzer_", "analyzer_shadow_", 1): v for k, v in trial.items()},
        **extra,
    }


def publish(client: RedisClient, settings: Settings) -> None:
    for i in range(MESSAGES):
        txn = {**BASE, "id": f"t-{i}", "is_threat": i % 2 == 0}
        client.xadd(transaction_keys(settings).stream, {"data": json.dumps(txn)})


def live_results(client: RedisClient, settings: Settings) -> list[dict[str, str]]:
    return [fields for _, fields in client.xrange(transaction_keys(settings).results)]


def test_the_shadow_is_asked_about_its_fraction_and_writes_beside_the_live_verdicts(
    model_api_server: ModelApiServer,
    shadow_server: ModelApiServer,
    start_shim: Start,
    settings: Settings,
    redis_client: RedisClient,
) -> None:
    picked = {f"t-{i}" for i in range(MESSAGES) if chosen(f"t-{i}", FRACTION)}
    assert 0 < len(picked) < MESSAGES, "the table's keys choose some, not all"
    values = with_shadow(
        model_api_server, "anthropic", shadow_server, analyzer_shadow_fraction=FRACTION
    )
    worker = start_shim("transactions", **values)
    worker.wait_ready(redis_client, timeout_s=60)
    publish(redis_client, settings)
    keys = transaction_keys(settings)
    shadow_key = shadow_results_key(keys)
    assert shadow_key == f"{keys.results}:shadow"
    wait_until(lambda: redis_client.xlen(keys.results) == MESSAGES, timeout_s=60)
    wait_until(lambda: redis_client.xlen(shadow_key) == len(picked), timeout_s=60)
    assert worker.stop() == 0, worker.tail()
    live = live_results(redis_client, settings)
    assert {(r["driver_used"], r["analyzer_role"], r["model"]) for r in live} == {
        ("analyzer", "primary", OPENAI_MODEL)
    }, "the shadow never decides"
    shadows = [fields for _, fields in redis_client.xrange(shadow_key)]
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
    assert SHADOW_KEY not in worker.text()


def test_the_live_verdicts_never_wait_for_a_slow_shadow(
    model_api_server: ModelApiServer,
    shadow_server: ModelApiServer,
    start_shim: Start,
    settings: Settings,
    redis_client: RedisClient,
) -> None:
    shadow_server.latency_s = 30.0  # far beyond the whole live run
    worker = start_shim("transactions", **with_shadow(model_api_server, "openai", shadow_server))
    worker.wait_ready(redis_client, timeout_s=60)
    publish(redis_client, settings)
    keys = transaction_keys(settings)
    wait_until(lambda: redis_client.xlen(keys.results) == MESSAGES, timeout_s=60)
    assert not any("status" in a for a in shadow_server.seen()), "all live before any shadow"
    wait_until(lambda: len(shadow_server.seen()) >= 1, timeout_s=30)  # it was asked
    assert redis_client.xlen(shadow_results_key(keys)) == 0
    assert all(r["analyzer_role"] == "primary" for r in live_results(redis_client, settings))
    assert worker.stop() == 0, worker.tail()


def test_the_shadows_spent_quota_never_holds_the_live_model(
    model_api_server: ModelApiServer,
    shadow_server: ModelApiServer,
    start_shim: Start,
    settings: Settings,
    redis_client: RedisClient,
) -> None:
    shadow_server.quota_after = 0  # every shadow call: 429 insufficient_quota
    worker = start_shim("transactions", **with_shadow(model_api_server, "openai", shadow_server))
    worker.wait_ready(redis_client, timeout_s=60)
    publish(redis_client, settings)
    keys = transaction_keys(settings)
    wait_until(lambda: redis_client.xlen(keys.results) == MESSAGES, timeout_s=60)
    wait_until(lambda: any(a.get("status") == 429 for a in shadow_server.seen()), timeout_s=30)
    assert worker.stop() == 0, worker.tail()
    live = live_results(redis_client, settings)
    assert [r["driver_used"] for r in live] == ["analyzer"] * MESSAGES, live
    assert all("provisional" not in r for r in live)
    assert len([a for a in model_api_server.seen() if a.get("status") == 200]) == MESSAGES
    assert redis_client.xlen(shadow_results_key(keys)) == 0
