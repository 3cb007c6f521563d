"""Every documented refusal of a model API, as a table: busy, exhausted, down or wrong.

Each row is one answer as its provider documents it (status, headers, body; sources in
the comments) and what :func:`workers.analyzer.answers.refusal` must make of it. The same
rows are the table in docs/analyzer.md ("Every documented answer").
"""

from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import pytest

from sentinel_platform.streams.consumer.processor import Busy
from workers.analyzer.answers import (
    CAUSES,
    ApiKind,
    busy_wait_s,
    error_body,
    refusal,
    seconds_to_quota_day_end,
)
from workers.analyzer.replies import (
    MAX_RETRY_AFTER_S,
    AnalyzerBusy,
    AnalyzerDown,
    AnalyzerError,
    AnalyzerExhausted,
)

DOC = Path(__file__).resolve().parents[3] / "docs" / "analyzer.md"
#: 05:00 UTC on 27 Nov 2026 is 21:00 PST the day before: Pacific midnight is 3 h away.
NOW = datetime(2026, 11, 27, 5, 0, 0, tzinfo=timezone.utc)
PACIFIC_MIDNIGHT_S = 3 * 3600.0


def openai_error(message: str, type_: str, code: str | None, param: str | None = None) -> bytes:
    """OpenAI's error envelope (platform.openai.com/docs/guides/error-codes)."""
    return json.dumps(
        {"error": {"message": message, "type": type_, "param": param, "code": code}}
    ).encode()


def anthropic_error(type_: str, message: str, **extra: Any) -> bytes:
    """Anthropic's error envelope (docs.anthropic.com/en/api/errors)."""
    error = {"type": type_, "message": message, **extra}
    return json.dumps(
        {"type": "error", "error": error, "request_id": "req_011CSHoEeqs5C35K2UUqR7Fy"}
    ).encode()


def google_error(code: int, status: str, message: str, details: list[Any]) -> bytes:
    """Google's error envelope as Gemini's OpenAI-compatible endpoint sends it: a list of
    one (ai.google.dev/gemini-api/docs/troubleshooting, .../rate-limits)."""
    error = {"code": code, "message": message, "status": status, "details": details}
    return json.dumps([{"error": error}]).encode()


def quota_failure(*quota_ids: str) -> dict[str, Any]:
    violations = [
        {
            "quotaMetric": "generativelanguage.googleapis.com/generate_content_free_tier_requests",
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
#: What the real worker must never show: the part of a key the provider echoes.
LEAKED = "sk-proj-"

# (id, api, status, headers, body, kind, wait_s or until_s, cause)
ROWS: list[tuple[str, ApiKind, int, dict[str, str], bytes, str, float | None, str]] = [
    # --- OpenAI (platform.openai.com/docs/guides/error-codes, .../rate-limits) ---------
    (
        "openai 429 rate_limit_exceeded, retry-after-ms first",
        "openai",
        429,
        {"retry-after-ms": "150", "retry-after": "1", "x-ratelimit-remaining-tokens": "0"},
        openai_error(OPENAI_RATE, "tokens", "rate_limit_exceeded"),
        "busy",
        0.15,
        "",
    ),
    (
        "openai 429 rate_limit_exceeded, Retry-After only",
        "openai",
        429,
        {"Retry-After": "20"},
        openai_error(OPENAI_RATE, "requests", "rate_limit_exceeded"),
        "busy",
        20.0,
        "",
    ),
    (
        "openai 429 insufficient_quota (legacy code)",
        "openai",
        429,
        {},
        openai_error(OPENAI_QUOTA, "insufficient_quota", "insufficient_quota"),
        "exhausted",
        None,
        "insufficient_quota",
    ),
    (  # several codes carry the type: matched on the type, never the code
        "openai 429 insufficient_quota / credit_balance_exhausted",
        "openai",
        429,
        {"retry-after": "1"},
        openai_error(OPENAI_QUOTA, "insufficient_quota", "credit_balance_exhausted"),
        "exhausted",
        None,
        "insufficient_quota",
    ),
    (
        "openai 429 insufficient_quota / project_spend_limit_exceeded",
        "openai",
        429,
        {},
        openai_error(OPENAI_QUOTA, "insufficient_quota", "project_spend_limit_exceeded"),
        "exhausted",
        None,
        "insufficient_quota",
    ),
    (
        "openai 401 invalid_api_key",
        "openai",
        401,
        {},
        openai_error(OPENAI_BAD_KEY, "invalid_request_error", "invalid_api_key"),
        "exhausted",
        None,
        "rejected_key",
    ),
    (
        "openai 403 unsupported_country_region_territory",
        "openai",
        403,
        {},
        openai_error(
            "Country, region, or territory not supported",
            "request_forbidden",
            "unsupported_country_region_territory",
        ),
        "exhausted",
        None,
        "rejected_key",
    ),
    (
        "openai 500 server_error",
        "openai",
        500,
        {},
        openai_error(
            "The server had an error while processing your request.", "server_error", None
        ),
        "down",
        None,
        "",
    ),
    (
        "openai 503 slow_down",
        "openai",
        503,
        {},
        openai_error("Please reduce your rate of requests.", "server_error", "slow_down"),
        "busy",
        None,
        "",
    ),
    (
        "openai 400 context_length_exceeded",
        "openai",
        400,
        {},
        openai_error(
            "This model's maximum context length is 2048 tokens.",
            "invalid_request_error",
            "context_length_exceeded",
            "messages",
        ),
        "wrong",
        None,
        "",
    ),
    # --- Anthropic (docs.anthropic.com/en/api/errors, .../rate-limits) ------------------
    (
        "anthropic 429 rate_limit_error with retry-after",
        "anthropic",
        429,
        {"retry-after": "12", "anthropic-ratelimit-tokens-remaining": "0"},
        anthropic_error(
            "rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit"
        ),
        "busy",
        12.0,
        "",
    ),
    (
        "anthropic 529 overloaded_error",
        "anthropic",
        529,
        {},
        anthropic_error("overloaded_error", "Overloaded"),
        "busy",
        None,
        "",
    ),
    (
        "anthropic 429 enforced_spend_limit_reached",
        "anthropic",
        429,
        {},
        anthropic_error(
            "rate_limit_error",
            "Your organization has reached its monthly spend limit.",
            details={"error_code": "enforced_spend_limit_reached"},
        ),
        "exhausted",
        None,
        "spend_limit",
    ),
    (
        "anthropic 400 spend limit with its reset",
        "anthropic",
        400,
        {},
        anthropic_error(
            "invalid_request_error",
            "You have reached your specified API usage limits. "
            "You will regain access on 2026-12-01 at 00:00 UTC.",
        ),
        "exhausted",
        (datetime(2026, 12, 1, tzinfo=timezone.utc) - NOW).total_seconds(),
        "spend_limit",
    ),
    (
        "anthropic 400 credit balance too low",
        "anthropic",
        400,
        {},
        anthropic_error(
            "invalid_request_error",
            "Your credit balance is too low to access the Anthropic API. "
            "Please go to Plans & Billing to upgrade or purchase credits.",
        ),
        "exhausted",
        None,
        "credit_balance",
    ),
    (
        "anthropic 402 billing_error",
        "anthropic",
        402,
        {},
        anthropic_error("billing_error", "Your account has a billing issue."),
        "exhausted",
        None,
        "credit_balance",
    ),
    (
        "anthropic 401 authentication_error",
        "anthropic",
        401,
        {},
        anthropic_error("authentication_error", "invalid x-api-key"),
        "exhausted",
        None,
        "rejected_key",
    ),
    (
        "anthropic 403 permission_error",
        "anthropic",
        403,
        {},
        anthropic_error("permission_error", "Your API key does not have permission."),
        "exhausted",
        None,
        "rejected_key",
    ),
    (
        "anthropic 400 invalid_request_error (a bad request)",
        "anthropic",
        400,
        {},
        anthropic_error("invalid_request_error", "max_tokens: Field required"),
        "wrong",
        None,
        "",
    ),
    (
        "anthropic 500 api_error",
        "anthropic",
        500,
        {},
        anthropic_error("api_error", "Internal server error"),
        "down",
        None,
        "",
    ),
    # --- Gemini, OpenAI-compatible endpoint (ai.google.dev/gemini-api/docs/rate-limits) --
    (
        "gemini 429 per-minute quota with retryDelay",
        "openai",
        429,
        {},
        google_error(
            429,
            "RESOURCE_EXHAUSTED",
            GEMINI_QUOTA,
            [
                quota_failure("GenerateRequestsPerMinutePerProjectPerModel-FreeTier"),
                retry_info("42s"),
            ],
        ),
        "busy",
        42.0,
        "",
    ),
    (  # a per-day quota lasts until Pacific midnight, whatever its retryDelay says
        "gemini 429 per-day quota",
        "openai",
        429,
        {},
        google_error(
            429,
            "RESOURCE_EXHAUSTED",
            GEMINI_QUOTA,
            [quota_failure("GenerateRequestsPerDayPerProjectPerModel-FreeTier"), retry_info("22s")],
        ),
        "exhausted",
        PACIFIC_MIDNIGHT_S,
        "daily_quota",
    ),
    (
        "gemini 400 API_KEY_INVALID",
        "openai",
        400,
        {},
        google_error(
            400,
            "INVALID_ARGUMENT",
            "API key not valid. Please pass a valid API key.",
            [
                {
                    "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                    "reason": "API_KEY_INVALID",
                    "domain": "googleapis.com",
                }
            ],
        ),
        "exhausted",
        None,
        "rejected_key",
    ),
    (
        "gemini 503 UNAVAILABLE (model overloaded)",
        "openai",
        503,
        {},
        google_error(503, "UNAVAILABLE", "The model is overloaded. Please try again later.", []),
        "busy",
        None,
        "",
    ),
    # --- Self-hosted OpenAI-compatible servers --------------------------------------------
    (  # Ollama: OLLAMA_MAX_QUEUE reached (docs/faq.md "How does Ollama handle concurrent requests")
        "ollama 503 server busy",
        "openai",
        503,
        {},
        json.dumps(
            {"error": "server busy, please try again.  maximum pending requests exceeded"}
        ).encode(),
        "busy",
        None,
        "",
    ),
    (
        "vllm 503 with Retry-After",
        "openai",
        503,
        {"Retry-After": "3"},
        b"",
        "busy",
        3.0,
        "",
    ),
    (  # llama-cpp-python's server wraps a pydantic ValidationError in HTTP 500
        "llama.cpp 500 request validation",
        "openai",
        500,
        {},
        openai_error(
            "1 validation error for CreateChatCompletionRequest\nresponse_format.type\n"
            "  Input should be 'text' or 'json_object'",
            "internal_server_error",
            None,
        ),
        "wrong",
        None,
        "",
    ),
    ("a proxy's 502, no body", "openai", 502, {}, b"<html>Bad Gateway</html>", "down", None, ""),
    # --- sentinel: today's meanings, and a rejected key --------------------------------
    ("sentinel 503 without Retry-After", "sentinel", 503, {}, b"", "down", None, ""),
    ("sentinel 503 with Retry-After", "sentinel", 503, {"Retry-After": "7"}, b"", "busy", 7.0, ""),
    ("sentinel 429", "sentinel", 429, {}, b"", "busy", None, ""),
    ("sentinel 529", "sentinel", 529, {}, b"", "down", None, ""),
    ("sentinel 401", "sentinel", 401, {}, b"", "exhausted", None, "rejected_key"),
    ("sentinel 403", "sentinel", 403, {}, b"", "exhausted", None, "rejected_key"),
    ("sentinel 400", "sentinel", 400, {}, b"", "wrong", None, ""),
]


def kind_of(error: AnalyzerError | Busy) -> str:
    if isinstance(error, AnalyzerBusy):
        return "busy"
    if isinstance(error, AnalyzerExhausted):
        return "exhausted"
    if isinstance(error, AnalyzerDown):
        return "down"
    assert type(error) is AnalyzerError, type(error)
    return "wrong"


@pytest.mark.parametrize(
    ("api", "status", "headers", "body", "kind", "seconds", "cause"),
    [row[1:] for row in ROWS],
    ids=[row[0] for row in ROWS],
)
def test_each_documented_answer_is_busy_exhausted_down_or_wrong(
    api: ApiKind,
    status: int,
    headers: dict[str, str],
    body: bytes,
    kind: str,
    seconds: float | None,
    cause: str,
) -> None:
    error = refusal(api, status, headers, body, NOW)
    assert kind_of(error) == kind, str(error)
    assert f"HTTP {status}" in str(error)
    if isinstance(error, AnalyzerBusy):
        assert error.retry_after_s == (None if seconds is None else pytest.approx(seconds))
    if isinstance(error, AnalyzerExhausted):
        assert error.cause == cause and cause in CAUSES
        assert error.until_s == (None if seconds is None else pytest.approx(seconds))
        assert error.outcome == "exhausted"


def test_no_message_shows_a_key_the_provider_echoes_or_the_raw_body() -> None:
    body = openai_error(OPENAI_BAD_KEY, "invalid_request_error", "invalid_api_key")
    rejected = refusal("openai", 401, {}, body, NOW)
    assert LEAKED not in str(rejected) and "abcd" not in str(rejected)
    assert "invalid_api_key" in str(rejected)
    echoed = openai_error(f"bad key sk-ant-api03-Zx9{'q' * 40} here", "server_error", None)
    assert "Zx9" not in str(refusal("openai", 500, {}, echoed, NOW))
    long = openai_error("x" * 5000, "server_error", None)
    assert len(str(refusal("openai", 500, {}, long, NOW))) < 400


@pytest.mark.parametrize(
    ("headers", "body", "seconds"),
    [
        ({"retry-after-ms": "1500.5"}, b"", 1.5005),
        ({"retry-after-ms": "soon", "retry-after": "4"}, b"", 4.0),  # invalid: next source
        ({"retry-after-ms": "-5", "retry-after": "4"}, b"", 4.0),
        ({"retry-after-ms": "nan"}, b"", None),
        ({"retry-after": "Fri, 27 Nov 2026 05:00:30 GMT"}, b"", 30.0),
        ({"retry-after": "999999"}, b"", MAX_RETRY_AFTER_S),  # a bogus header is capped
        ({"retry-after-ms": "99999999"}, b"", MAX_RETRY_AFTER_S),
        (
            {},
            google_error(429, "RESOURCE_EXHAUSTED", "", [retry_info("10.689924287s")]),
            10.689924287,
        ),
        ({}, google_error(429, "RESOURCE_EXHAUSTED", "", [retry_info("soon")]), None),
        ({}, b"", None),
    ],
)
def test_the_wait_of_a_busy_answer(
    headers: dict[str, str], body: bytes, seconds: float | None
) -> None:
    waited = busy_wait_s(headers, error_body(body), NOW)
    assert waited == (None if seconds is None else pytest.approx(seconds))


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b"", {}),
        (b"not json", {}),
        (b"[]", {}),
        (b'{"error": null}', {}),
        (b'{"error": "busy"}', {"message": "busy"}),
        (b'{"error": {"type": 3, "code": 42}}', {"type": "3", "code": "42"}),
        (anthropic_error("x", "m", details={"error_code": "c"}), {"type": "x", "code": "c"}),
    ],
)
def test_error_bodies_of_any_shape_are_read_without_raising(
    body: bytes, expected: dict[str, str]
) -> None:
    parsed = error_body(body)
    for name, value in expected.items():
        assert getattr(parsed, name) == value
    if not expected:
        assert parsed == type(parsed)()


@pytest.mark.parametrize(
    ("now", "seconds"),
    [
        (NOW, PACIFIC_MIDNIGHT_S),  # PST, UTC-8
        (datetime(2026, 7, 1, 6, 0, tzinfo=timezone.utc), 3600.0),  # PDT, UTC-7: 23:00 local
        (datetime(2026, 7, 1, 7, 0, tzinfo=timezone.utc), 86400.0),  # local midnight exactly
    ],
)
def test_a_per_day_quota_lasts_until_midnight_pacific(now: datetime, seconds: float) -> None:
    assert seconds_to_quota_day_end(now) == pytest.approx(seconds)


def test_every_row_of_the_docs_table_is_a_row_of_this_table() -> None:
    """docs/analyzer.md's "Every documented answer": each of its rows names an API and
    statuses; each pair is tested above with that meaning."""
    text = DOC.read_text().split("## Every documented answer", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in text.splitlines() if re.match(r"\| (openai|anthropic|sentinel)", line)]
    assert len(rows) >= 20
    tested = {(api, status, kind) for _, api, status, _, _, kind, _, _ in ROWS}
    for row in rows:
        api, answer, meaning = (cell.strip() for cell in row.strip("|").split("|")[:3])
        kinds = {k for k in ("busy", "exhausted", "down", "wrong") if k in meaning}
        for status in map(int, re.findall(r"\b[2-5][0-9]{2}\b", answer)):
            found = {kind for a, s, kind in tested if a == api.split()[0] and s == status}
            assert found & kinds, f"docs row not tested: {api} {status} {meaning}"
