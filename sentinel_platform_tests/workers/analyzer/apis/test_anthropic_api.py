"""The Messages API: the forced tool call built, and the documented tool-use reply read
into a verdict with its usage (or refused as "wrong")."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sentinel_platform.settings import load_settings
from sentinel_platform_tests.harness.model_api_bodies import (
    ANTHROPIC_MODEL,
    VERDICT,
    anthropic_reply,
)
from workers.analyzer import AnalyzerError, UnusableAnswer, Usage
from workers.analyzer.apis.anthropic_api import AnthropicApi
from workers.analyzer.prompts import Prompt, load_prompt
from workers.processors import axioms

KEY = "sk-ant-api03-T4ble-K3y-0123456789"
PAYLOAD = {"source_id": "sensor-1", "anomaly_score": 0.93}
TOOL = "record_axiom_verdict"


@pytest.fixture(scope="module")
def prompt(tmp_path_factory: pytest.TempPathFactory) -> Prompt:
    return load_prompt(axioms.PROMPT, load_settings(home=tmp_path_factory.mktemp("h")))


@pytest.mark.parametrize(
    ("base_url", "url"),
    [
        ("https://api.anthropic.com", "https://api.anthropic.com/v1/messages"),
        ("https://api.anthropic.com/", "https://api.anthropic.com/v1/messages"),
        ("https://api.anthropic.com/v1", "https://api.anthropic.com/v1/messages"),
        ("https://api.anthropic.com/v1/messages", "https://api.anthropic.com/v1/messages"),
        ("http://127.0.0.1:9000/proxy", "http://127.0.0.1:9000/proxy/v1/messages"),
    ],
)
def test_the_endpoint_is_messages_below_the_base_url(base_url: str, url: str) -> None:
    assert AnthropicApi("m").endpoint(base_url) == url


def test_the_key_and_version_headers() -> None:
    api = AnthropicApi("claude-3-5-haiku-latest", KEY)
    assert api.auth_headers("https://api.anthropic.com") == {
        "x-api-key": KEY,
        "anthropic-version": "2023-06-01",
    }
    assert KEY not in repr(api)


def test_the_request_forces_the_verdict_tool_with_instructions_first(prompt: Prompt) -> None:
    api = AnthropicApi("claude-3-5-haiku-latest", KEY, max_output_tokens=256)
    body = json.loads(api.request("axiom", PAYLOAD, prompt))
    assert (body["model"], body["temperature"], body["max_tokens"]) == (
        "claude-3-5-haiku-latest",
        0,
        256,
    )
    assert body["tools"] == [
        {
            "name": TOOL,
            "description": "Record the axiom's verdict.",
            "input_schema": prompt.schema,
        }
    ]
    assert body["tool_choice"] == {"type": "tool", "name": TOOL}
    assert body["system"] == [
        {"type": "text", "text": prompt.instructions, "cache_control": {"type": "ephemeral"}}
    ]
    (message,) = body["messages"]
    assert (message["role"], json.loads(message["content"])) == ("user", PAYLOAD)
    assert list(body).index("messages") == len(body) - 1, "the message comes last"
    assert KEY not in json.dumps(body)


def test_the_documented_tool_use_reply_is_a_verdict_with_usage(prompt: Prompt) -> None:
    reply = anthropic_reply(TOOL, VERDICT)
    reply["content"].insert(0, {"type": "text", "text": "I'll record the verdict."})
    reply["usage"].update(cache_creation_input_tokens=20, cache_read_input_tokens=1500)
    verdict = AnthropicApi("claude-3-5-haiku-latest").read(json.dumps(reply).encode(), prompt)
    assert (verdict.is_threat, verdict.risk_level, verdict.narrative) == (
        True,
        "medium",
        VERDICT["narrative"],
    )
    assert (verdict.model, verdict.prompt_version) == (ANTHROPIC_MODEL, prompt.version)
    # input_tokens counts only what follows the cache; the verdict records the whole prompt
    assert verdict.usage == Usage(472 + 20 + 1500, 93, 1500)


def reply_with(**change: Any) -> bytes:
    reply = anthropic_reply(TOOL, VERDICT)
    reply.update(change)
    return json.dumps(reply).encode()


@pytest.mark.parametrize(
    ("body", "error"),
    [
        (b"[]", "reply is not a JSON object"),
        (reply_with(content=[{"type": "text", "text": "low risk"}]), f"no {TOOL} tool call"),
        (reply_with(content=anthropic_reply("other_tool", VERDICT)["content"]), "tool call"),
        (reply_with(stop_reason="max_tokens"), "cut at SENTINEL_ANALYZER_MAX_OUTPUT_TOKENS"),
        (
            reply_with(content=anthropic_reply(TOOL, {**VERDICT, "risk_level": "dire"})["content"]),
            "risk_level",
        ),
        (
            reply_with(content=anthropic_reply(TOOL, {"narrative": "x"})["content"]),
            "does not match axiom_verdict",
        ),
    ],
)
def test_a_reply_that_does_not_validate_is_wrong(prompt: Prompt, body: bytes, error: str) -> None:
    with pytest.raises(AnalyzerError, match=error):
        AnthropicApi("m").read(body, prompt)


@pytest.mark.parametrize(
    "body",
    [
        reply_with(stop_reason="max_tokens"),
        reply_with(content=[{"type": "text", "text": "low risk"}]),
        reply_with(content=anthropic_reply(TOOL, {"narrative": "x"})["content"]),
    ],
    ids=["cut", "no-tool-call", "not-the-verdict"],
)
def test_a_billed_reply_without_a_verdict_says_what_it_cost(prompt: Prompt, body: bytes) -> None:
    with pytest.raises(UnusableAnswer) as error:
        AnthropicApi("claude").read(body, prompt)
    assert (error.value.usage, error.value.model) == (Usage(472, 93, 0), ANTHROPIC_MODEL)
