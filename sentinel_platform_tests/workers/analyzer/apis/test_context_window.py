"""A message too long for the model is that message's refusal, never the fleet's.

Every dialect's documented context-length refusal is one row (the source of each body is
named beside it); each is the message's own :class:`MessageRefused` under both model APIs,
learns the context it announces, and holds nobody. A refused recipe still holds the fleet,
including a ``max_tokens`` that alone fills the context. Then the check before sending
(:class:`ContextWindow`), and the same through :class:`HttpAnalyzer` against the real
HTTP server and Redis: no hold, the breaker untouched, the next message answered.
"""

from __future__ import annotations

import json
from contextlib import nullcontext
from typing import Any

import pytest

from sentinel_platform.settings import Settings
from sentinel_platform.streams.consumer.processor import Unprocessable
from sentinel_platform.streams.operators.analyzer_holds import read_hold
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform_tests.harness.model_api_server import ModelApiServer
from sentinel_platform_tests.workers.analyzer.apis.test_model_api import RECIPE_REFUSALS
from sentinel_platform_tests.workers.processors.test_transactions import make_txn
from workers.analyzer import HttpAnalyzer
from workers.analyzer.answers.replies import AnalyzerExhausted, MessageRefused
from workers.analyzer.apis.anthropic_api import AnthropicApi
from workers.analyzer.apis.context_window import (
    BYTES_PER_TOKEN_AT_MOST,
    ContextWindow,
    context_refusal,
    fits,
)
from workers.analyzer.apis.openai_api import OpenAiApi
from workers.analyzer.breaker import CircuitBreaker
from workers.analyzer.limits.fleet_limits import FleetLimits
from workers.analyzer.prompts import load_prompt
from workers.processors import TransactionProcessor, transactions


def _json(value: dict[str, Any]) -> bytes:
    return json.dumps(value).encode()


VLLM_TOO_LONG = (
    "This model's maximum context length is 4096 tokens. However, you requested 5130 tokens "
    "(4730 in the messages, 400 in the completion). Please reduce the length of the messages "
    "or completion."
)
VLLM_MAX_TOKENS = (
    "'max_tokens' or 'max_completion_tokens' is too large: 400. This model's maximum context "
    "length is 4096 tokens and your request has 3900 input tokens (400 > 4096 - 3900)."
)

#: (dialect, status, body, the context it announces): each one documented refusal.
CONTEXT_REFUSALS: list[tuple[str, int, bytes, int | None]] = [
    (  # OpenAI's error-codes guide: 400 invalid_request_error, code context_length_exceeded
        "openai",
        400,
        _json(
            {
                "error": {
                    "message": "This model's maximum context length is 128000 tokens. "
                    "However, your messages resulted in 130412 tokens. Please reduce the "
                    "length of the messages.",
                    "type": "invalid_request_error",
                    "param": "messages",
                    "code": "context_length_exceeded",
                }
            }
        ),
        128000,
    ),
    (  # vLLM serving_engine._validate_input, ErrorResponse in its {"error": {...}} form
        "vllm",
        400,
        _json(
            {
                "error": {
                    "message": VLLM_TOO_LONG,
                    "type": "BadRequestError",
                    "param": None,
                    "code": 400,
                }
            }
        ),
        4096,
    ),
    (  # the same, vLLM's older top-level ErrorResponse
        "vllm legacy",
        400,
        _json(
            {
                "object": "error",
                "message": VLLM_TOO_LONG,
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
        ),
        4096,
    ),
    (  # vLLM's per-request max_tokens check, the words that held the fleet
        "vllm max_tokens",
        400,
        _json(
            {
                "error": {
                    "message": VLLM_MAX_TOKENS,
                    "type": "BadRequestError",
                    "param": None,
                    "code": 400,
                }
            }
        ),
        4096,
    ),
    (  # the same, vLLM's older top-level ErrorResponse
        "vllm max_tokens legacy",
        400,
        _json(
            {
                "object": "error",
                "message": VLLM_MAX_TOKENS,
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
        ),
        4096,
    ),
    (  # Anthropic's errors page: 400 invalid_request_error "prompt is too long"
        "anthropic",
        400,
        _json(
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "prompt is too long: 210000 tokens > 200000 maximum",
                },
            }
        ),
        200000,
    ),
    (  # Anthropic, the prompt and max_tokens together past the context
        "anthropic with max_tokens",
        400,
        _json(
            {
                "type": "error",
                "error": {
                    "type": "invalid_request_error",
                    "message": "input length and `max_tokens` exceed context limit: "
                    "197626 + 4096 > 200000, decrease input length or `max_tokens` and "
                    "try again",
                },
            }
        ),
        200000,
    ),
    (  # llama.cpp's server (tools/server/server.cpp, ERROR_TYPE_EXCEED_CONTEXT_SIZE)
        "llama.cpp",
        400,
        _json(
            {
                "error": {
                    "code": 400,
                    "message": "the request exceeds the available context size, try increasing it",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": 4476,
                    "n_ctx": 4096,
                }
            }
        ),
        4096,
    ),
    (  # llama.cpp's server, the wording that names both counts
        "llama.cpp counted",
        400,
        _json(
            {
                "error": {
                    "code": 400,
                    "message": "request (4476 tokens) exceeds the available context size "
                    "(4096 tokens), try increasing it",
                    "type": "exceed_context_size_error",
                    "n_prompt_tokens": 4476,
                    "n_ctx": 4096,
                }
            }
        ),
        4096,
    ),
    (  # llama-cpp-python 0.3.36 (constraints.txt), llama_cpp/server/errors.py:
        # context_length_exceeded, 400, from the engine's "Requested tokens ... exceed
        # context window of 2048"
        "llama-cpp-python",
        400,
        _json(
            {
                "error": {
                    "message": "This model's maximum context length is 2048 tokens. "
                    "However, you requested 2712 tokens (2312 in the messages, 400 in the "
                    "completion). Please reduce the length of the messages or completion.",
                    "type": "invalid_request_error",
                    "param": "messages",
                    "code": "context_length_exceeded",
                }
            }
        ),
        2048,
    ),
    (  # llama-cpp-python, the same route when the request cannot be read back: 500 with
        # the engine's words (errors.py's fallback, type internal_server_error)
        "llama-cpp-python engine",
        500,
        _json(
            {
                "error": {
                    "message": "Requested tokens (2312) exceed context window of 2048",
                    "type": "internal_server_error",
                    "param": None,
                    "code": None,
                }
            }
        ),
        2048,
    ),
]


def apis(context: ContextWindow | None = None) -> list[OpenAiApi | AnthropicApi]:
    window = context or ContextWindow()
    return [OpenAiApi("m", context=window), AnthropicApi("m", context=window)]


@pytest.mark.parametrize(
    ("status", "body", "announced"),
    [pytest.param(*row[1:], id=row[0]) for row in CONTEXT_REFUSALS],
)
def test_a_documented_context_refusal_is_the_messages_own_and_teaches_the_context(
    status: int, body: bytes, announced: int | None
) -> None:
    for api in apis():
        refused = api.misconfigured(status, body)
        assert isinstance(refused, MessageRefused), (api.kind, refused)
        assert not isinstance(refused, AnalyzerExhausted), "no fleet hold for one message"
        assert refused.sent, "the server was asked"
        assert f"HTTP {status}" in str(refused)
        assert api.context.tokens == announced


@pytest.mark.parametrize(("status", "body", "setting"), RECIPE_REFUSALS)
def test_a_refused_recipe_still_holds_the_fleet_under_both_apis(
    status: int, body: bytes, setting: str
) -> None:
    for api in apis():
        refused = api.misconfigured(status, body)
        assert isinstance(refused, AnalyzerExhausted), (api.kind, refused)
        assert refused.cause == "request_refused" and setting in str(refused)


def test_a_max_tokens_that_fills_the_whole_context_is_the_recipes_refusal() -> None:
    body = _json(
        {
            "error": {
                "message": "'max_tokens' or 'max_completion_tokens' is too large: 400. This "
                "model's maximum context length is 256 tokens and your request has 90 "
                "input tokens (400 > 256 - 90).",
                "type": "BadRequestError",
                "param": None,
                "code": 400,
            }
        }
    )
    for api in apis():
        refused = api.misconfigured(400, body)
        assert isinstance(refused, AnalyzerExhausted), "no message fits: the recipe's"
        assert refused.cause == "request_refused"
        assert "SENTINEL_ANALYZER_MAX_OUTPUT_TOKENS" in str(refused)


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (400, _json({"error": {"message": "Invalid 'messages': empty array.", "code": None}})),
        (429, _json({"error": {"message": "maximum context length is 10 tokens"}})),
        (503, b"upstream connect error"),
        (400, b""),
    ],
)
def test_other_answers_are_no_context_refusal(status: int, body: bytes) -> None:
    assert context_refusal(status, body) is None


def test_a_context_learnt_keeps_the_smallest_announced() -> None:
    window = ContextWindow(8192)
    window.learn(4096)
    window.learn(32768)
    assert window.tokens == 4096


@pytest.mark.parametrize(
    ("body_bytes", "max_tokens", "context", "fit"),
    [
        (8 * 600, 400, 1000, True),  # at its fewest 600 tokens: exactly full
        (8 * 600 + 1, 400, 1000, False),
        (8 * 100, 400, 1000, True),
        (0, 1000, 1000, True),
    ],
)
def test_a_body_is_refused_unsent_only_when_its_fewest_tokens_do_not_fit(
    body_bytes: int, max_tokens: int, context: int, fit: bool
) -> None:
    assert BYTES_PER_TOKEN_AT_MOST == 8
    assert fits(body_bytes, max_tokens, context) is fit


def cyrillic_txn(chars: int = 2400) -> dict[str, Any]:
    memo = ("Перевод средств по договору займа " * chars)[:chars]
    return make_txn(message=memo).model_dump(mode="json", exclude_none=True)


def test_a_message_past_a_known_context_is_refused_before_it_is_sent(
    rules_settings: Settings,
) -> None:
    prompt = load_prompt(transactions.PROMPT, rules_settings)
    for api in apis(ContextWindow(1000)):
        short = make_txn().model_dump(mode="json", exclude_none=True)
        assert api.request("transaction", short, prompt)  # fits: sent
        with pytest.raises(MessageRefused) as caught:
            api.request("transaction", cyrillic_txn(), prompt)
        assert not caught.value.sent and "context of 1000 tokens" in str(caught.value)


def test_a_context_the_prompt_alone_cannot_fit_is_the_recipes_refusal(
    rules_settings: Settings,
) -> None:
    prompt = load_prompt(transactions.PROMPT, rules_settings)
    for api in apis(ContextWindow(450)):
        with pytest.raises(AnalyzerExhausted) as caught:
            api.request("transaction", make_txn().model_dump(mode="json"), prompt)
        assert caught.value.cause == "request_refused"


@pytest.mark.parametrize("when_down", ["rules", "wait"])
def test_through_the_client_a_context_refusal_holds_nobody(
    when_down: str,
    model_api_server: ModelApiServer,
    redis_client: RedisClient,
    rules_settings: Settings,
) -> None:
    model_api_server.context_tokens = 1000  # vLLM's 'max_tokens' ... is too large
    prompt = load_prompt(transactions.PROMPT, rules_settings)
    client = HttpAnalyzer(
        model_api_server.url,
        5.0,
        breaker=CircuitBreaker(failures=1, cooldown_s=60),
        when_down=when_down,  # type: ignore[arg-type]
        limits=FleetLimits("context-test"),
        api=OpenAiApi("m"),
        prompts={"transaction": prompt},
    )
    client.bind_redis(redis_client)
    processor = TransactionProcessor(rules_settings, client)
    long = make_txn(id="t-long", message=cyrillic_txn()["message"])
    if when_down == "wait":
        with pytest.raises(Unprocessable, match="maximum context length is 1000"):
            processor.process(long)
    else:
        assert processor.process(long).result["driver_used"] == "fallback"
    assert read_hold(redis_client, "context-test") is None, "no fleet hold"
    assert client.breaker.state == "closed", "one message's length is no outage"
    assert processor.process(make_txn()).result["driver_used"] == "analyzer"
    sent = len(model_api_server.seen())
    with pytest.raises(Unprocessable) if when_down == "wait" else nullcontext():
        processor.process(long)  # the context learnt: refused before it is sent
    assert len(model_api_server.seen()) == sent
    client.close()
