"""The model APIs' refusals as their providers document them, one :class:`Row` each.

Bodies and headers are built as each provider documents them (sources in the comments);
each row says what :func:`workers.analyzer.answers.refusals.refusal` must make of the answer:
``busy`` (with its wait), ``exhausted`` (with its cause and how long), ``down`` or
``wrong``. The table test is ``test_refusals.py``; docs/analyzer.md shows the same rows.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, NamedTuple

from workers.analyzer.answers.refusals import ApiKind

#: 05:00 UTC on 27 Nov 2026 is 21:00 PST the day before: Pacific midnight is 3 h away.
NOW = datetime(2026, 11, 27, 5, 0, 0, tzinfo=timezone.utc)
PACIFIC_MIDNIGHT_S = 3 * 3600.0


class Row(NamedTuple):
    """One documented answer and its meaning; ``seconds`` is a busy answer's wait or an
    exhaustion's ``until_s`` (None: the caller's backoff, or until released)."""

    id: str
    api: ApiKind
    status: int
    body: bytes
    kind: str
    seconds: float | None = None
    cause: str = ""
    headers: dict[str, str] = {}


def openai_error(message: str, type_: str, code: str | None, param: str | None = None) -> bytes:
    """OpenAI's error envelope (platform.openai.com/docs/guides/error-codes)."""
    error = {"message": message, "type": type_, "param": param, "code": code}
    return json.dumps({"error": error}).encode()


def anthropic_error(type_: str, message: str, **extra: Any) -> bytes:
    """Anthropic's error envelope (docs.anthropic.com/en/api/errors)."""
    error = {"type": type_, "message": message, **extra}
    return json.dumps({"type": "error", "error": error, "request_id": "req_011CSHoE"}).encode()


def google_error(code: int, status: str, message: str, details: list[Any]) -> bytes:
    """Google's error envelope as Gemini's OpenAI-compatible endpoint sends it: a list of
    one (ai.google.dev/gemini-api/docs/troubleshooting, .../rate-limits)."""
    error = {"code": code, "message": message, "status": status, "details": details}
    return json.dumps([{"error": error}]).encode()


def quota_failure(*quota_ids: str) -> dict[str, Any]:
    metric = "generativelanguage.googleapis.com/generate_content_free_tier_requests"
    violations = [
        {
            "quotaMetric": metric,
            "quotaId": quota_id,
            "quotaDimensions": {"location": "global", "model": "gemini-2.5-flash"},
            "quotaValue": "250",
        }
        for quota_id in quota_ids
    ]
    return {"@type": "type.googleapis.com/google.rpc.QuotaFailure", "violations": violations}


def retry_info(delay: str) -> dict[str, Any]:
    return {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": delay}


GEMINI_QUOTA = (
    "You exceeded your current quota, please check your plan and billing details. For more "
    "information on this error, head to: https://ai.google.dev/gemini-api/docs/rate-limits."
)
OPENAI_QUOTA = (
    "You exceeded your current quota, please check your plan and billing details. For more "
    "information on this error, read the docs: "
    "https://platform.openai.com/docs/guides/error-codes/api-errors."
)
OPENAI_RATE = (
    "Rate limit reached for gpt-4o-mini in organization org-abc on tokens per min (TPM): "
    "Limit 200000, Used 199800, Requested 700. Please try again in 150ms."
)
OPENAI_BAD_KEY = (
    "Incorrect API key provided: sk-proj-****************************abcd. You can find "
    "your API key at https://platform.openai.com/account/api-keys."
)
ANTHROPIC_SPEND = (
    "You have reached your specified API usage limits. "
    "You will regain access on 2026-12-01 at 00:00 UTC."
)
ANTHROPIC_CREDIT = (
    "Your credit balance is too low to access the Anthropic API. "
    "Please go to Plans & Billing to upgrade or purchase credits."
)
LLAMA_CPP_VALIDATION = (
    "1 validation error for CreateChatCompletionRequest\nresponse_format.type\n"
    "  Input should be 'text' or 'json_object'"
)
GEMINI_PER_MINUTE = "GenerateRequestsPerMinutePerProjectPerModel-FreeTier"
GEMINI_PER_DAY = "GenerateRequestsPerDayPerProjectPerModel-FreeTier"
API_KEY_INVALID = {
    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
    "reason": "API_KEY_INVALID",
    "domain": "googleapis.com",
}
RATE = "rate_limit_exceeded"
REGION = "unsupported_country_region_territory"

# OpenAI: platform.openai.com/docs/guides/error-codes, .../rate-limits. Several codes carry
# the insufficient_quota type (credit_balance_exhausted, *_spend_limit_exceeded): matched
# on the type, never the code.
OPENAI_ROWS = [
    Row(
        "openai 429 rate_limit_exceeded, retry-after-ms first",
        *("openai", 429, openai_error(OPENAI_RATE, "tokens", RATE), "busy", 0.15),
        headers={"retry-after-ms": "150", "retry-after": "1", "x-ratelimit-remaining-tokens": "0"},
    ),
    Row(
        "openai 429 rate_limit_exceeded, Retry-After only",
        *("openai", 429, openai_error(OPENAI_RATE, "requests", RATE), "busy", 20.0),
        headers={"Retry-After": "20"},
    ),
    Row(
        "openai 429 insufficient_quota (legacy code)",
        *("openai", 429, openai_error(OPENAI_QUOTA, "insufficient_quota", "insufficient_quota")),
        *("exhausted", None, "insufficient_quota"),
    ),
    Row(
        "openai 429 insufficient_quota / credit_balance_exhausted",
        "openai",
        429,
        openai_error(OPENAI_QUOTA, "insufficient_quota", "credit_balance_exhausted"),
        *("exhausted", None, "insufficient_quota", {"retry-after": "1"}),
    ),
    Row(
        "openai 429 insufficient_quota / project_spend_limit_exceeded",
        "openai",
        429,
        openai_error(OPENAI_QUOTA, "insufficient_quota", "project_spend_limit_exceeded"),
        *("exhausted", None, "insufficient_quota"),
    ),
    Row(
        "openai 401 invalid_api_key",
        *("openai", 401, openai_error(OPENAI_BAD_KEY, "invalid_request_error", "invalid_api_key")),
        *("exhausted", None, "rejected_key"),
    ),
    Row(
        "openai 403 unsupported_country_region_territory",
        "openai",
        403,
        openai_error("Country, region, or territory not supported", "request_forbidden", REGION),
        *("exhausted", None, "rejected_key"),
    ),
    Row(
        "openai 500 server_error",
        *("openai", 500, openai_error("The server had an error.", "server_error", None), "down"),
    ),
    Row(
        "openai 503 slow_down",
        "openai",
        503,
        openai_error("Please reduce your rate of requests.", "server_error", "slow_down"),
        "busy",
    ),
    Row(
        "openai 400 context_length_exceeded",
        "openai",
        400,
        openai_error(
            "This model's maximum context length is 2048 tokens.",
            "invalid_request_error",
            "context_length_exceeded",
            "messages",
        ),
        "wrong",
    ),
]

# Anthropic: docs.anthropic.com/en/api/errors, .../rate-limits (the spend limit's 429
# carries error.details.error_code; its 400s say so in the message only).
ANTHROPIC_ROWS = [
    Row(
        "anthropic 429 rate_limit_error with retry-after",
        "anthropic",
        429,
        anthropic_error("rate_limit_error", "Number of request tokens has exceeded your limit"),
        *("busy", 12.0, "", {"retry-after": "12", "anthropic-ratelimit-tokens-remaining": "0"}),
    ),
    Row(
        "anthropic 529 overloaded_error",
        *("anthropic", 529, anthropic_error("overloaded_error", "Overloaded"), "busy"),
    ),
    Row(
        "anthropic 429 enforced_spend_limit_reached",
        "anthropic",
        429,
        anthropic_error(
            "rate_limit_error",
            "Your organization has reached its monthly spend limit.",
            details={"error_code": "enforced_spend_limit_reached"},
        ),
        *("exhausted", None, "spend_limit"),
    ),
    Row(
        "anthropic 400 spend limit with its reset",
        *("anthropic", 400, anthropic_error("invalid_request_error", ANTHROPIC_SPEND)),
        "exhausted",
        (datetime(2026, 12, 1, tzinfo=timezone.utc) - NOW).total_seconds(),
        "spend_limit",
    ),
    Row(
        "anthropic 400 credit balance too low",
        *("anthropic", 400, anthropic_error("invalid_request_error", ANTHROPIC_CREDIT)),
        *("exhausted", None, "credit_balance"),
    ),
    Row(
        "anthropic 402 billing_error",
        *("anthropic", 402, anthropic_error("billing_error", "Your account has a billing issue.")),
        *("exhausted", None, "credit_balance"),
    ),
    Row(
        "anthropic 401 authentication_error",
        *("anthropic", 401, anthropic_error("authentication_error", "invalid x-api-key")),
        *("exhausted", None, "rejected_key"),
    ),
    Row(
        "anthropic 403 permission_error",
        *("anthropic", 403, anthropic_error("permission_error", "Your API key has no permission.")),
        *("exhausted", None, "rejected_key"),
    ),
    Row(
        "anthropic 400 invalid_request_error (a bad request)",
        *("anthropic", 400, anthropic_error("invalid_request_error", "max_tokens: Field required")),
        "wrong",
    ),
    Row(
        "anthropic 500 api_error",
        *("anthropic", 500, anthropic_error("api_error", "Internal server error"), "down"),
    ),
]

# Gemini's OpenAI-compatible endpoint: ai.google.dev/gemini-api/docs/rate-limits. A per-day
# quota lasts until Pacific midnight, whatever its retryDelay says.
GEMINI_ROWS = [
    Row(
        "gemini 429 per-minute quota with retryDelay",
        "openai",
        429,
        google_error(
            429,
            "RESOURCE_EXHAUSTED",
            GEMINI_QUOTA,
            [quota_failure(GEMINI_PER_MINUTE), retry_info("42s")],
        ),
        *("busy", 42.0),
    ),
    Row(
        "gemini 429 per-day quota",
        "openai",
        429,
        google_error(
            429,
            "RESOURCE_EXHAUSTED",
            GEMINI_QUOTA,
            [quota_failure(GEMINI_PER_DAY), retry_info("22s")],
        ),
        *("exhausted", PACIFIC_MIDNIGHT_S, "daily_quota"),
    ),
    Row(
        "gemini 400 API_KEY_INVALID",
        "openai",
        400,
        google_error(400, "INVALID_ARGUMENT", "API key not valid.", [API_KEY_INVALID]),
        *("exhausted", None, "rejected_key"),
    ),
    Row(
        "gemini 503 UNAVAILABLE (model overloaded)",
        *("openai", 503, google_error(503, "UNAVAILABLE", "The model is overloaded.", [])),
        "busy",
    ),
]

# Self-hosted OpenAI-compatible servers. Ollama: OLLAMA_MAX_QUEUE reached (its FAQ, "How
# does Ollama handle concurrent requests"); llama-cpp-python's server wraps a pydantic
# ValidationError of the request in HTTP 500 (llama_cpp/server/errors.py).
SELF_HOSTED_ROWS = [
    Row(
        "ollama 503 server busy",
        "openai",
        503,
        json.dumps(
            {"error": "server busy, please try again.  maximum pending requests exceeded"}
        ).encode(),
        "busy",
    ),
    Row("vllm 503 with Retry-After", "openai", 503, b"", "busy", 3.0, headers={"Retry-After": "3"}),
    Row(
        "llama.cpp 500 request validation",
        "openai",
        500,
        openai_error(LLAMA_CPP_VALIDATION, "internal_server_error", None),
        "wrong",
    ),
    Row("a proxy's 502, no body", "openai", 502, b"<html>Bad Gateway</html>", "down"),
]

# Gateways and the SDKs' own rules (the retry decisions of the openai and anthropic
# packages, _base_client.py: 408, 409, 429 and 5xx retried, x-should-retry obeyed, a wait
# used only above 0). Azure's 429s are reported with retry-after-ms: 0; Envoy answers 503
# "no healthy upstream" (text/plain) when no upstream host is healthy; Cloudflare's 520-524
# say the origin did not answer.
GATEWAY_ROWS = [
    Row("nginx 408 request timeout", "openai", 408, b"<html>408 Request Time-out</html>", "busy"),
    Row("409 lock timeout", "openai", 409, b"", "busy"),
    Row("azure 429 retry-after-ms 0", "openai", 429, b"", "busy", headers={"retry-after-ms": "0"}),
    Row(
        "azure 429 retry-after-ms 0 beside Retry-After 10",
        *("openai", 429, b"", "busy", 10.0),
        headers={"retry-after-ms": "0", "Retry-After": "10"},
    ),
    Row(
        "429 Retry-After a past date",
        *("openai", 429, b"", "busy"),
        headers={"Retry-After": "Fri, 27 Nov 2026 04:59:00 GMT"},
    ),
    Row("envoy 503 no healthy upstream", "openai", 503, b"no healthy upstream", "busy"),
    Row("a gateway's 504", "openai", 504, b"upstream request timeout", "down"),
    *[Row(f"cloudflare {s}", "openai", s, b"<html>origin</html>", "down") for s in range(520, 525)],
    Row("x-should-retry false", "openai", 503, b"", "wrong", headers={"x-should-retry": "false"}),
    Row("x-should-retry true", "openai", 400, b"", "busy", headers={"x-should-retry": "true"}),
]

# sentinel: today's meanings unchanged, but a rejected key is exhausted under every API,
# 408 and 409 are busy, and a wait of 0 or in the past is no wait given.
SENTINEL_ROWS = [
    Row("sentinel 503 without Retry-After", "sentinel", 503, b"", "down"),
    Row(
        "sentinel 503 with Retry-After", "sentinel", 503, b"", "busy", 7.0, "", {"Retry-After": "7"}
    ),
    Row("sentinel 429", "sentinel", 429, b"", "busy"),
    Row("sentinel 529", "sentinel", 529, b"", "down"),
    Row("sentinel 401", "sentinel", 401, b"", "exhausted", None, "rejected_key"),
    Row("sentinel 403", "sentinel", 403, b"", "exhausted", None, "rejected_key"),
    Row("sentinel 400", "sentinel", 400, b"", "wrong"),
    Row("sentinel 408", "sentinel", 408, b"", "busy"),
    Row(
        "sentinel 503 with Retry-After 0",
        *("sentinel", 503, b"", "busy", None, "", {"Retry-After": "0"}),
    ),
]

ROWS = [
    *OPENAI_ROWS,
    *ANTHROPIC_ROWS,
    *GEMINI_ROWS,
    *SELF_HOSTED_ROWS,
    *GATEWAY_ROWS,
    *SENTINEL_ROWS,
]
