"""A server refusing what a recipe sends is a misconfiguration named for the operator,
never an "analyzer down" that fills the results with rules fallbacks."""

from __future__ import annotations

import json

import pytest

from sentinel_platform.settings import Settings
from sentinel_platform_tests.harness.model_api_server import ModelApiServer
from sentinel_platform_tests.workers.processors.test_transactions import make_txn
from workers.analyzer import HttpAnalyzer
from workers.analyzer.answers.replies import AnalyzerExhausted
from workers.analyzer.apis.anthropic_api import AnthropicApi
from workers.analyzer.apis.model_api import refused_request
from workers.analyzer.apis.openai_api import OpenAiApi
from workers.analyzer.prompts import load_prompt
from workers.processors import transactions

#: The body llama-cpp-python 0.3 answers a ``json_schema`` response_format with.
LLAMA_CPP_500 = {
    "error": {
        "message": "[{'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
        "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema', "
        "'ctx': {'expected': \"'text' or 'json_object'\"}}]",
        "type": "internal_server_error",
        "param": None,
        "code": None,
    }
}


def error(message: str, type_: str = "invalid_request_error", code: str | None = None) -> bytes:
    return json.dumps({"error": {"message": message, "type": type_, "code": code}}).encode()


#: (status, body, the setting it names): refusals of what the recipe sends.
RECIPE_REFUSALS: list[tuple[int, bytes, str]] = [
    # llama-cpp-python's server on response_format json_schema: its route handler
    # answers the request's validation error as a 500 (llama_cpp/server/errors.py)
    (
        500,
        json.dumps(LLAMA_CPP_500).encode(),
        "SENTINEL_ANALYZER_RESPONSE_FORMAT",
    ),
    (
        400,
        error("Invalid schema for response_format 'transaction_verdict'"),
        "SENTINEL_ANALYZER_RESPONSE_FORMAT",
    ),
    (
        400,
        error("Unsupported parameter: 'max_tokens' is not supported with this model."),
        "SENTINEL_ANALYZER_MAX_OUTPUT_TOKENS",
    ),
    (
        400,
        error("Unsupported value: 'temperature' does not support 0 with this model."),
        "SENTINEL_ANALYZER_MODEL",
    ),
    (  # Gemini's OpenAI-compatible endpoint on a schema feature it lacks
        400,
        error(
            'Invalid JSON payload received. Unknown name "additionalProperties" at '
            "'generation_config.response_schema': Cannot find field."
        ),
        "SENTINEL_ANALYZER_RESPONSE_FORMAT",
    ),
    (
        404,
        error("The model `gpt-9` does not exist", code="model_not_found"),
        "SENTINEL_ANALYZER_MODEL",
    ),
    (
        404,
        json.dumps(
            {
                "type": "error",
                "error": {"type": "not_found_error", "message": "model: claude-9"},
            }
        ).encode(),
        "SENTINEL_ANALYZER_MODEL",
    ),
    (
        422,
        b'{"detail": [{"loc": ["body", "response_format"]}]}',
        "SENTINEL_ANALYZER_RESPONSE_FORMAT",
    ),
]


@pytest.mark.parametrize(("status", "body", "setting"), RECIPE_REFUSALS)
def test_a_refused_recipe_is_exhausted_naming_the_setting(
    status: int, body: bytes, setting: str
) -> None:
    refused = refused_request(status, body)
    assert isinstance(refused, AnalyzerExhausted)
    assert (refused.cause, refused.until_s) == ("request_refused", None)
    assert setting in str(refused) and f"HTTP {status}" in str(refused)


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (500, b""),  # a plain server error: down, as today
        (503, error("response_format")),  # busy or down, never a recipe
        (429, error("Rate limit reached for max_tokens", code="rate_limit_exceeded")),
        (401, error("Incorrect API key provided", code="invalid_api_key")),
        (400, error("Your credit balance is too low to access the Anthropic API.")),
    ],
)
def test_other_refusals_are_left_to_what_answers_mean(status: int, body: bytes) -> None:
    assert refused_request(status, body) is None


def test_a_server_refusing_json_schema_stops_at_the_first_call_naming_the_setting(
    model_api_server: ModelApiServer, rules_settings: Settings
) -> None:
    model_api_server.refuse_with = 500
    model_api_server.refusal_body = {"detail": "response_format: json_schema not supported"}
    prompt = load_prompt(transactions.PROMPT, rules_settings)
    analyzer = HttpAnalyzer(
        model_api_server.url, 2.0, api=OpenAiApi("smollm2"), prompts={"transaction": prompt}
    )
    with pytest.raises(AnalyzerExhausted, match="SENTINEL_ANALYZER_RESPONSE_FORMAT"):
        analyzer.assess_transaction(make_txn())
    assert len(model_api_server.seen()) == 1


@pytest.mark.parametrize("api", [OpenAiApi("m"), AnthropicApi("m")], ids=["openai", "anthropic"])
def test_a_cyrillic_memo_goes_out_as_utf8_text_not_escapes(
    api: OpenAiApi | AnthropicApi, rules_settings: Settings
) -> None:
    memo = ("Перевод средств по договору займа, остаток " * 60)[:2400]
    payload = make_txn(message=memo).model_dump(mode="json", exclude_none=True)
    body = api.request("transaction", payload, load_prompt(transactions.PROMPT, rules_settings))
    text = body.decode("utf-8")
    assert memo in text, "the memo is sent as its own characters"
    assert "\\u04" not in text and "\\\\u04" not in text, "no \\uXXXX escapes"
    assert json.loads(json.loads(text)["messages"][-1]["content"])["message"] == memo
    assert len(body) < 2 * len(memo.encode()), "about the memo's UTF-8 size, not 3x it"
