"""Chat Completions: the request built for each server's recipe, and the documented reply
read into a verdict with its usage (or refused as "wrong")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sentinel_platform.settings import load_settings
from sentinel_platform_tests.harness.model_api_bodies import OPENAI_MODEL, VERDICT, openai_reply
from workers.analyzer import AnalyzerError, UnusableAnswer, Usage
from workers.analyzer.apis.openai_api import OpenAiApi
from workers.analyzer.prompts import Prompt, load_prompt
from workers.processors import axioms, transactions

KEY = "sk-proj-T4ble-K3y-0123456789"
PAYLOAD = {"id": "t-1", "amount": 497.0, "currency": "USD"}


@pytest.fixture(scope="module")
def prompt(tmp_path_factory: pytest.TempPathFactory) -> Prompt:
    return load_prompt(transactions.PROMPT, load_settings(home=tmp_path_factory.mktemp("h")))


@pytest.mark.parametrize(
    ("base_url", "url"),
    [
        ("https://api.openai.com/v1", "https://api.openai.com/v1/chat/completions"),
        ("https://api.openai.com/v1/", "https://api.openai.com/v1/chat/completions"),
        (
            "https://generativelanguage.googleapis.com/v1beta/openai/",
            "https://generativelanguage.googleapis.com/v1beta/openai/chat/completions",
        ),
        ("http://localhost:11434/v1", "http://localhost:11434/v1/chat/completions"),
        ("http://vllm:8000/v1/chat/completions", "http://vllm:8000/v1/chat/completions"),
        (
            "https://res.openai.azure.com/openai/deployments/gpt4o/?api-version=2024-10-21",
            "https://res.openai.azure.com/openai/deployments/gpt4o/chat/completions"
            "?api-version=2024-10-21",
        ),
    ],
)
def test_the_endpoint_is_chat_completions_below_the_base_url(base_url: str, url: str) -> None:
    assert OpenAiApi("m").endpoint(base_url) == url


@pytest.mark.parametrize(
    ("url", "key", "headers"),
    [
        ("https://api.openai.com/v1", KEY, {"Authorization": f"Bearer {KEY}"}),
        ("https://openrouter.ai/api/v1", KEY, {"Authorization": f"Bearer {KEY}"}),
        ("https://res.openai.azure.com/openai/v1", KEY, {"api-key": KEY}),
        ("https://res.cognitiveservices.azure.com/openai/v1", KEY, {"api-key": KEY}),
        ("http://127.0.0.1:8000/v1", "", {}),  # a local server: no key, no header
    ],
)
def test_the_key_goes_in_the_header_the_host_expects(
    url: str, key: str, headers: dict[str, str]
) -> None:
    api = OpenAiApi("m", key)
    assert api.auth_headers(url) == headers
    assert KEY not in repr(api)


@pytest.mark.parametrize("response_format", ["json_schema", "json_object"])
def test_the_request_carries_model_temperature_bound_schema_and_message_last(
    prompt: Prompt, response_format: Any
) -> None:
    api = OpenAiApi("gpt-4o-mini", KEY, max_output_tokens=321, response_format=response_format)
    body = json.loads(api.request("transaction", PAYLOAD, prompt))
    assert (body["model"], body["temperature"], body["max_tokens"]) == ("gpt-4o-mini", 0, 321)
    system, user = body["messages"]
    assert (system["role"], system["content"]) == ("system", prompt.instructions)
    assert (user["role"], json.loads(user["content"])) == ("user", PAYLOAD)
    schema = prompt.schema
    assert schema["additionalProperties"] is False
    assert schema["required"] == ["is_threat", "narrative", "risk_level"]
    if response_format == "json_schema":
        assert body["response_format"] == {
            "type": "json_schema",
            "json_schema": {"name": "transaction_verdict", "strict": True, "schema": schema},
        }
    else:  # llama.cpp's Python server: the schema beside json_object
        assert body["response_format"] == {"type": "json_object", "schema": schema}
    assert KEY not in json.dumps(body)


def test_the_documented_reply_is_a_verdict_with_model_version_and_usage(prompt: Prompt) -> None:
    body = json.dumps(openai_reply(VERDICT)).encode()
    verdict = OpenAiApi("gpt-4o-mini").read(body, prompt)
    assert (verdict.is_threat, verdict.risk_level, verdict.narrative) == (
        True,
        "medium",
        VERDICT["narrative"],
    )
    assert (verdict.model, verdict.prompt_version) == (OPENAI_MODEL, prompt.version)
    assert verdict.usage == Usage(1117, 46, 1024)
    assert verdict.recorded() == {
        "analyzer_role": "primary",
        "model": OPENAI_MODEL,
        "prompt_version": prompt.version,
        "input_tokens": "1117",
        "output_tokens": "46",
        "cached_input_tokens": "1024",
    }


def reply_with(change: dict[str, Any], message: dict[str, Any] | None = None) -> bytes:
    reply = openai_reply(VERDICT)
    reply["choices"][0].update(change)
    reply["choices"][0]["message"].update(message or {})
    return json.dumps(reply).encode()


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"not json", "reply is not JSON"),
        (b'{"choices": []}', "reply has no choices"),
        (reply_with({"finish_reason": "length"}), "cut at SENTINEL_ANALYZER_MAX_OUTPUT_TOKENS"),
        (reply_with({}, {"refusal": "I can't help", "content": None}), "refused"),
        (reply_with({}, {"content": None}), "no text content"),
        (reply_with({}, {"content": "{}"}), "does not match transaction_verdict"),
        (
            reply_with({}, {"content": json.dumps({**VERDICT, "is_threat": None})}),
            "is_threat",
        ),
        (reply_with({}, {"content": json.dumps({**VERDICT, "risk_level": "x"})}), "risk_level"),
        (reply_with({}, {"content": json.dumps({**VERDICT, "extra": 1})}), "extra"),
        (reply_with({}, {"content": json.dumps({**VERDICT, "is_threat": "yes"})}), "is_threat"),
    ],
)
def test_a_reply_that_does_not_validate_is_wrong(prompt: Prompt, body: bytes, error: str) -> None:
    with pytest.raises(AnalyzerError, match=error):
        OpenAiApi("m").read(body, prompt)


def test_usage_absent_is_recorded_as_nothing(prompt: Prompt) -> None:
    reply = openai_reply(VERDICT)
    del reply["usage"]
    verdict = OpenAiApi("served-model").read(json.dumps(reply).encode(), prompt)
    assert verdict.usage is None and "input_tokens" not in verdict.recorded()


def test_each_stream_declares_its_own_prompt_and_schema(tmp_path: Path) -> None:
    settings = load_settings(home=tmp_path)
    txn, axiom = (load_prompt(m.PROMPT, settings) for m in (transactions, axioms))
    assert (txn.schema_name, axiom.schema_name) == ("transaction_verdict", "axiom_verdict")
    assert txn.instructions != axiom.instructions and txn.version != axiom.version


@pytest.mark.parametrize(
    "body",
    [
        reply_with({"finish_reason": "length"}, {"content": '{"is_threat": true, "ri'}),
        reply_with({}, {"refusal": "I can't help with that.", "content": None}),
        reply_with({}, {"content": "The transaction looks fine."}),
        reply_with({}, {"content": json.dumps({**VERDICT, "risk_level": "x"})}),
    ],
    ids=["cut", "refusal", "not-json", "not-the-verdict"],
)
def test_a_billed_reply_without_a_verdict_says_what_it_cost(prompt: Prompt, body: bytes) -> None:
    with pytest.raises(UnusableAnswer) as error:
        OpenAiApi("gpt-4o-mini").read(body, prompt)
    assert (error.value.usage, error.value.model) == (Usage(1117, 46, 1024), OPENAI_MODEL)


def test_a_reply_without_usage_or_a_verdict_is_plainly_wrong(prompt: Prompt) -> None:
    reply = json.loads(reply_with({"finish_reason": "length"}))
    del reply["usage"]
    with pytest.raises(AnalyzerError, match="cut at") as error:
        OpenAiApi("m").read(json.dumps(reply).encode(), prompt)
    assert not isinstance(error.value, UnusableAnswer)
