"""The answers of the model API server (:mod:`~sentinel_platform_tests.harness.model_api_server`)
as the providers document them: the replies that carry a verdict, and the refusals (a rate
limit, a spent quota, a context too small, a revoked key), each written from the
provider's reference or errors guide, not from the platform's code.
"""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone
from typing import Any

#: The verdict every served request gets (valid for both streams' verdict models).
VERDICT = {"is_threat": True, "risk_level": "medium", "narrative": "Structuring pattern."}
OPENAI_MODEL = "gpt-4o-mini-2024-07-18"
ANTHROPIC_MODEL = "claude-3-5-haiku-20241022"


#: OpenAI's documented 429 for a token limit reached (no ``Retry-After``).
RATE_LIMITED = {
    "error": {
        "message": "Rate limit reached for gpt-4o-mini in organization org-x on tokens per "
        "min (TPM): Limit 120000, Used 119800, Requested 400. Please try again in 200ms.",
        "type": "tokens",
        "param": None,
        "code": "rate_limit_exceeded",
    }
}

#: Anthropic's documented 429 (errors page: ``rate_limit_error``), sent with ``retry-after``.
ANTHROPIC_RATE_LIMITED = {
    "type": "error",
    "error": {
        "type": "rate_limit_error",
        "message": "This request would exceed the rate limit for your organization of "
        "20,000 input tokens per minute.",
    },
}

#: OpenAI's documented 429 for a spent quota or credit balance (error codes guide).
INSUFFICIENT_QUOTA = {
    "error": {
        "message": "You exceeded your current quota, please check your plan and billing "
        "details. For more information on this error, read the docs: "
        "https://platform.openai.com/docs/guides/error-codes/api-errors.",
        "type": "insufficient_quota",
        "param": None,
        "code": "insufficient_quota",
    }
}


def context_refusal(dialect: str, context: int, prompt: int, completion: int) -> dict[str, Any]:
    """The documented 400 body for a request of ``prompt`` + ``completion`` tokens past a
    ``context``-token model: vLLM's (its OpenAI server's ``_validate_input``, the
    ``ErrorResponse`` in the ``{"error": {...}}`` form, or the
    older top-level ``{"object": "error", ...}``), OpenAI's ``context_length_exceeded``
    (its error-codes guide) and Anthropic's "prompt is too long" (its errors page)."""
    if dialect == "anthropic":
        message = f"prompt is too long: {prompt + completion} tokens > {context} maximum"
        return {"type": "error", "error": {"type": "invalid_request_error", "message": message}}
    if dialect == "openai":
        said = (
            f"This model's maximum context length is {context} tokens. However, your "
            f"messages resulted in {prompt + completion} tokens. Please reduce the length of "
            "the messages."
        )
        return {
            "error": {
                "message": said,
                "type": "invalid_request_error",
                "param": "messages",
                "code": "context_length_exceeded",
            }
        }
    if dialect == "vllm_max_tokens":
        said = (
            f"'max_tokens' or 'max_completion_tokens' is too large: {completion}. This "
            f"model's maximum context length is {context} tokens and your request has "
            f"{prompt} input tokens ({completion} > {context} - {prompt})."
        )
    else:
        said = (
            f"This model's maximum context length is {context} tokens. However, you "
            f"requested {prompt + completion} tokens ({prompt} in the messages, {completion} "
            "in the completion). Please reduce the length of the messages or completion."
        )
    error = {"message": said, "type": "BadRequestError", "param": None, "code": 400}
    return {"object": "error", **error} if dialect == "vllm_legacy" else {"error": error}


def masked(key: str) -> str:
    """A key as OpenAI's 401 message shows it: its first 8 and last 4 characters."""
    return f"{key[:8]}{'*' * max(0, len(key) - 12)}{key[-4:]}" if len(key) > 12 else "***"


def rejected_key(path: str, key: str) -> dict[str, Any]:
    """The documented 401 of an unknown or revoked key: OpenAI's ``invalid_api_key``
    (error codes guide), Anthropic's ``authentication_error`` (errors reference)."""
    if path.endswith("/messages"):
        return {
            "type": "error",
            "error": {"type": "authentication_error", "message": "invalid x-api-key"},
        }
    return {
        "error": {
            "message": f"Incorrect API key provided: {masked(key)}. You can find your API "
            "key at https://platform.openai.com/account/api-keys.",
            "type": "invalid_request_error",
            "param": None,
            "code": "invalid_api_key",
        }
    }


def request_key(headers: dict[str, str]) -> str:
    """The key a request carries (lower-cased header names)."""
    bearer = headers.get("authorization", "").removeprefix("Bearer ")
    return bearer or headers.get("x-api-key", "")


def shown_message(body: dict[str, Any]) -> dict[str, Any]:
    """What a request asks about: the JSON object its last user message carries (both
    APIs send the message that way, after the instructions), or {} when it carries none."""
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    content = users[-1].get("content") if users else None
    try:
        found = json.loads(content) if isinstance(content, str) else None
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def openai_reply(verdict: dict[str, Any], model: str = OPENAI_MODEL) -> dict[str, Any]:
    """The Chat Completions reference's response object, the verdict as its content,
    naming ``model`` as the model that answered."""
    return {
        "id": "chatcmpl-B9MHDbslfkBeAs8l4bebGdFOJ6PeG",
        "object": "chat.completion",
        "created": 1741570283,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": json.dumps(verdict),
                    "refusal": None,
                    "annotations": [],
                },
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": {
            "prompt_tokens": 1117,
            "completion_tokens": 46,
            "total_tokens": 1163,
            "prompt_tokens_details": {"cached_tokens": 1024, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        },
        "service_tier": "default",
        "system_fingerprint": "fp_fc9f1d7035",
    }


def anthropic_reply(
    tool: str, verdict: dict[str, Any], model: str = ANTHROPIC_MODEL
) -> dict[str, Any]:
    """The Messages reference's tool-use response, calling ``tool`` with the verdict,
    naming ``model`` as the model that answered."""
    return {
        "id": "msg_01Aq9w938a90dw8q",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [
            {
                "type": "tool_use",
                "id": "toolu_01A09q90qw90lq917835lq9",
                "name": tool,
                "input": verdict,
            }
        ],
        "stop_reason": "tool_use",
        "stop_sequence": None,
        "usage": {
            "input_tokens": 472,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": 93,
        },
    }


def rfc3339_after(seconds: float) -> str:
    """The whole second (UTC, RFC 3339) at or after ``seconds`` from now."""
    at = datetime.now(timezone.utc) + timedelta(seconds=seconds)
    whole = at.replace(microsecond=0)
    return (whole + timedelta(seconds=1 if whole < at else 0)).strftime("%Y-%m-%dT%H:%M:%SZ")
