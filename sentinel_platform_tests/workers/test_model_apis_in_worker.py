"""Model APIs as users run them: ``python -m workers.watch_transactions`` and
``python -m workers.watch_axioms`` with ``SENTINEL_ANALYZER_API=openai`` or ``anthropic``,
against a real HTTP server on 127.0.0.1 speaking that API's documented format, and a real
Redis.

What is promised: every verdict is the model's (``driver_used=analyzer``) and records the
model, the prompt's version and the tokens; a transaction's verdict keeps the model's
narrative; the server saw the documented request (path, auth header, model, schema); a
setting that cannot call the API stops the worker at start-up naming it; and the key
never reaches the worker's output, even when the server echoes it back.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sentinel_platform.settings import Settings, load_settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import axiom_keys, transaction_keys
from sentinel_platform_tests.harness.fixtures.models import Start
from sentinel_platform_tests.harness.model_api_bodies import ANTHROPIC_MODEL, OPENAI_MODEL, VERDICT
from sentinel_platform_tests.harness.model_api_server import ModelApiServer
from sentinel_platform_tests.harness.model_lanes import api_settings, scrape_samples
from sentinel_platform_tests.harness.waits import wait_until
from sentinel_platform_tests.workers.processors.test_transactions import BASE
from workers.analyzer.prompts import load_prompt
from workers.processors import axioms, transactions

KEY = "sk-Adapt3rs-W0rker-K3y-0123456789"
MESSAGES = 6
#: What each API's documented reply reports: model, input, output, cached input tokens.
REPORTED = {
    "openai": (OPENAI_MODEL, "1117", "46", "1024"),
    "anthropic": (ANTHROPIC_MODEL, "472", "93", "0"),
}
PATHS = {"openai": "/v1/chat/completions", "anthropic": "/v1/messages"}


def entries(stream: str) -> list[dict[str, str]]:
    if stream == "transactions":
        return [{"data": json.dumps({**BASE, "id": f"t-{i}"})} for i in range(MESSAGES)]
    return [
        {
            "status": "degraded",
            "metric_value": "3.5",
            "anomaly_score": "0.9",
            "source_id": f"sensor-{i}",
            "emitted_at": "2026-11-21T10:00:00Z",
            "domain": "aml",
        }
        for i in range(MESSAGES)
    ]


@pytest.mark.parametrize("api", ["openai", "anthropic"])
@pytest.mark.parametrize("stream", ["transactions", "axioms"])
def test_every_verdict_is_the_models_with_what_it_cost(
    api: str,
    stream: str,
    model_api_server: ModelApiServer,
    start_shim: Start,
    settings: Settings,
    redis_client: RedisClient,
) -> None:
    keys = transaction_keys(settings) if stream == "transactions" else axiom_keys(settings)
    worker = start_shim(stream, **api_settings(api, model_api_server, analyzer_api_key=KEY))
    worker.wait_ready(redis_client, timeout_s=60)
    for fields in entries(stream):
        redis_client.xadd(keys.stream, fields)
    wait_until(lambda: redis_client.xlen(keys.results) == MESSAGES, timeout_s=60)
    declared = (transactions if stream == "transactions" else axioms).PROMPT
    prompt = load_prompt(declared, load_settings(home=settings.home_dir))
    model, input_tokens, output_tokens, cached = REPORTED[api]
    for _, result in redis_client.xrange(keys.results):
        assert result["driver_used"] == "analyzer", result
        assert result["risk_level"] == "medium"
        assert (result["model"], result["prompt_version"]) == (model, prompt.version)
        assert (result["input_tokens"], result["output_tokens"]) == (input_tokens, output_tokens)
        assert result["cached_input_tokens"] == cached
        narrative = result["narrative" if stream == "transactions" else "audit_narrative"]
        assert narrative == VERDICT["narrative"], "the verdict keeps what the model said"
        if stream == "transactions":
            assert result["is_threat"] == "true"
    seen = model_api_server.seen()
    assert len(seen) == MESSAGES, "one call per message"
    for request in seen:
        assert_documented_request(api, request, prompt.schema, prompt.instructions)
    assert worker.stop() == 0, worker.tail()
    assert KEY not in worker.text()


#: A hosted model's slow answer: the seeds' Gemini calls take 4-8 s, past the 5 s the
#: platform's own contract is given by default.
SLOW_MODEL_S = 6.5


def test_a_model_api_answering_in_seconds_gets_every_verdict_on_the_default_timeout(
    model_api_server: ModelApiServer,
    start_shim: Start,
    settings: Settings,
    redis_client: RedisClient,
) -> None:
    """No ``SENTINEL_ANALYZER_TIMEOUT_S``: a model API given the sentinel contract's 5 s
    timed out every such call and decided it by the rules."""
    keys = transaction_keys(settings)
    model_api_server.latency_s = SLOW_MODEL_S
    worker = start_shim("transactions", **api_settings("openai", model_api_server))
    worker.wait_ready(redis_client, timeout_s=60)
    for fields in entries("transactions")[:2]:
        redis_client.xadd(keys.stream, fields)
    wait_until(lambda: redis_client.xlen(keys.results) == 2, timeout_s=60)
    drivers = [result["driver_used"] for _, result in redis_client.xrange(keys.results)]
    assert drivers == ["analyzer", "analyzer"], worker.tail()
    (started,) = worker.events("analyzer_configured")
    assert (started["timeout_s"], started["api"], started["model"]) == (
        60.0,
        "openai",
        "gpt-4o-mini",
    )
    assert (started["stream"], started["consumer"]) == (keys.stream, "model-transactions")
    assert worker.stop() == 0, worker.tail()


def test_the_metrics_endpoint_counts_the_reported_tokens_per_model(
    model_api_server: ModelApiServer,
    start_shim: Start,
    settings: Settings,
    redis_client: RedisClient,
) -> None:
    keys = transaction_keys(settings)
    worker = start_shim(
        "transactions",
        args=["--metrics-port", "0"],
        **api_settings("openai", model_api_server, analyzer_api_key=KEY),
    )
    worker.wait_ready(redis_client, timeout_s=60)
    for fields in entries("transactions"):
        redis_client.xadd(keys.stream, fields)
    wait_until(lambda: redis_client.xlen(keys.results) == MESSAGES, timeout_s=60)
    (serving,) = worker.events("metrics_serving")
    samples = scrape_samples(serving["url"])
    model, input_tokens, output_tokens, cached = REPORTED["openai"]
    counted = {
        kind: [
            v
            for k, v in samples.items()
            if k.startswith("sentinel_worker_analyzer_tokens_total{")
            and f'kind="{kind}"' in k
            and f'model="{model}"' in k
            and f'stream="{keys.stream}"' in k
        ]
        for kind in ("input", "output", "cached_input")
    }
    assert counted == {
        "input": [MESSAGES * int(input_tokens)],
        "output": [MESSAGES * int(output_tokens)],
        "cached_input": [MESSAGES * int(cached)],
    }
    assert worker.stop() == 0, worker.tail()


def assert_documented_request(
    api: str, request: dict[str, Any], schema: dict[str, Any], instructions: str
) -> None:
    body, headers = request["body"], request["headers"]
    assert request["path"] == PATHS[api]
    assert body["temperature"] == 0 and body["max_tokens"] == 400
    if api == "openai":
        assert headers["authorization"] == f"Bearer {KEY}"
        assert body["model"] == "gpt-4o-mini"
        assert body["response_format"]["json_schema"]["strict"] is True
        assert body["response_format"]["json_schema"]["schema"] == schema
        assert body["messages"][0] == {"role": "system", "content": instructions}
        assert body["messages"][-1]["role"] == "user"
    else:
        assert (headers["x-api-key"], headers["anthropic-version"]) == (KEY, "2023-06-01")
        assert body["model"] == "claude-3-5-haiku-latest"
        assert body["tools"][0]["input_schema"] == schema
        assert body["tool_choice"] == {"type": "tool", "name": body["tools"][0]["name"]}
        assert body["system"][0]["text"] == instructions


@pytest.mark.parametrize(
    ("values", "named"),
    [
        ({"analyzer_api": "openai"}, "SENTINEL_ANALYZER_MODEL"),
        (
            {
                "analyzer_api": "openai",
                "analyzer_model": "m",
                "analyzer_api_key": KEY,
                "analyzer_api_key_file": "{key_file}",
            },
            "SENTINEL_ANALYZER_API_KEY_FILE",
        ),
        (
            {
                "analyzer_api": "anthropic",
                "analyzer_model": "m",
                "analyzer_api_key_file": "{missing}",
            },
            "SENTINEL_ANALYZER_API_KEY_FILE",
        ),
        (
            {
                "analyzer_api": "openai",
                "analyzer_model": "m",
                "analyzer_transactions_prompt_file": "{missing}",
            },
            "SENTINEL_ANALYZER_TRANSACTIONS_PROMPT_FILE",
        ),
        (  # the prompt and max_tokens alone are past the context set
            {"analyzer_api": "openai", "analyzer_model": "m", "analyzer_context_tokens": "450"},
            "SENTINEL_ANALYZER_CONTEXT_TOKENS",
        ),
    ],
)
def test_a_setting_that_cannot_call_the_api_stops_the_worker_naming_it(
    values: dict[str, str],
    named: str,
    model_api_server: ModelApiServer,
    start_shim: Start,
    tmp_path: Path,
) -> None:
    key_file = tmp_path / "key"
    key_file.write_text(KEY)
    paths = {"key_file": key_file, "missing": tmp_path / "missing.txt"}
    values = {k: v.format(**paths) for k, v in values.items()}
    worker = start_shim("transactions", analyzer_url=model_api_server.url, **values)
    assert worker.wait(timeout_s=60) != 0, worker.tail()
    assert named in worker.text(), worker.tail()
    assert KEY not in worker.text()
    assert not model_api_server.seen()


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_the_key_never_shows_even_when_the_server_echoes_it(
    api: str,
    model_api_server: ModelApiServer,
    start_shim: Start,
    settings: Settings,
    redis_client: RedisClient,
    tmp_path: Path,
) -> None:
    model_api_server.refuse_with = 401
    key_file = tmp_path / "key"
    key_file.write_text(f"{KEY}\n")
    values = api_settings(api, model_api_server, analyzer_api_key_file=key_file)
    worker = start_shim("transactions", **values)
    worker.wait_ready(redis_client, timeout_s=60)
    keys = transaction_keys(settings)
    for fields in entries("transactions")[:2]:
        redis_client.xadd(keys.stream, fields)
    # A rejected key: the messages are decided as SENTINEL_ANALYZER_WHEN_DOWN says (rules)
    wait_until(lambda: redis_client.xlen(keys.results) == 2, timeout_s=60)
    echoed = [r for r in model_api_server.seen() if KEY in json.dumps(r["headers"])]
    assert echoed, "the worker sent the key, so the server could echo it"
    logged = [e for e in worker.events() if str(e.get("event", "")).startswith("analyzer")]
    assert logged, "the refusal was logged (without the key)"
    worker.stop()
    assert KEY not in worker.text(), "the key must never reach the worker's output"
    for _, result in redis_client.xrange(keys.results):
        assert KEY not in json.dumps(result)
