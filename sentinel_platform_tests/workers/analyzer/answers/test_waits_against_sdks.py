"""The decision table checked against the official ``openai`` and ``anthropic`` packages.

Each row is one answer (status, headers, body) as a provider or a common gateway sends it.
The SDK clients are asked their own retry decision for it, the exact code they run
(``_should_retry(response)`` and the first retry's ``_calculate_retry_timeout``), and the
platform's reading (the API's refused recipe, then
:func:`workers.analyzer.answers.refusals.refusal`, as ``HttpAnalyzer`` reads an answer)
must agree: busy or down where they retry, wrong or exhausted where they do not, and a
busy answer's wait theirs (a header's wait, or for "no wait given" their first backoff,
0.5 s less up to a quarter). Every row where the platform decides otherwise on purpose is
listed in :data:`DIFFERENCES` with its reason (the same list is in docs/analyzer.md); a
listed row that agrees fails too, so the list stays true.
"""

from __future__ import annotations

import time
from datetime import datetime, timezone
from email.utils import formatdate
from typing import Any, NamedTuple

import anthropic
import httpx2
import openai
import pytest
from anthropic._models import FinalRequestOptions as AnthropicOptions
from openai._models import FinalRequestOptions as OpenAiOptions

from sentinel_platform.streams.consumer.processor import Busy
from sentinel_platform_tests.workers.analyzer.answers.documented_answers import (
    ANTHROPIC_CREDIT,
    GEMINI_PER_DAY,
    GEMINI_PER_MINUTE,
    GEMINI_QUOTA,
    LLAMA_CPP_VALIDATION,
    OPENAI_QUOTA,
    OPENAI_RATE,
    anthropic_error,
    google_error,
    openai_error,
    quota_failure,
    retry_info,
)
from workers.analyzer.answers.busy_spell import backoff_s
from workers.analyzer.answers.refusals import refusal
from workers.analyzer.answers.replies import (
    AnalyzerBusy,
    AnalyzerDown,
    AnalyzerError,
    AnalyzerExhausted,
)
from workers.analyzer.answers.waits import ApiKind
from workers.analyzer.apis.anthropic_api import AnthropicApi
from workers.analyzer.apis.openai_api import OpenAiApi

ENVOY_NO_UPSTREAM = b"no healthy upstream"
CLOUDFLARE = {"server": "cloudflare", "content-type": "text/html"}


class Row(NamedTuple):
    """One answer; ``api`` ``any`` is asked of both SDKs (a gateway's answer)."""

    id: str
    api: str
    status: int
    meaning: str
    headers: dict[str, str] = {}
    body: bytes = b""


ROWS = [
    Row("408 a gateway's request timeout", "any", 408, "busy"),
    Row("409 lock timeout", "any", 409, "busy"),
    Row("429 no wait", "any", 429, "busy", {}, openai_error(OPENAI_RATE, "tokens", "x")),
    Row("429 retry-after-ms 150", "any", 429, "busy", {"retry-after-ms": "150"}),
    Row("429 Retry-After 20", "any", 429, "busy", {"retry-after": "20"}),
    Row("429 Retry-After in 30 s", "any", 429, "busy", {"retry-after": "in 30 s"}),
    Row("429 retry-after-ms 0 (Azure)", "any", 429, "busy", {"retry-after-ms": "0"}),
    Row("429 Retry-After 0", "any", 429, "busy", {"retry-after": "0"}),
    Row("429 Retry-After a past date", "any", 429, "busy", {"retry-after": "30 s ago"}),
    Row(
        "429 retry-after-ms 0 beside Retry-After 10",
        *("any", 429, "busy", {"retry-after-ms": "0", "retry-after": "10"}),
    ),
    Row("429 Retry-After 300", "any", 429, "busy", {"retry-after": "300"}),
    Row("500", "any", 500, "down", {}, openai_error("The server had an error.", "x", None)),
    Row("502 a proxy's bad gateway", "any", 502, "down", {}, b"<html>Bad Gateway</html>"),
    Row("503 no wait", "any", 503, "busy"),
    Row(
        "503 Envoy no healthy upstream", "any", 503, "busy", {"server": "envoy"}, ENVOY_NO_UPSTREAM
    ),
    Row("503 Retry-After 3", "any", 503, "busy", {"retry-after": "3"}),
    Row("504 gateway timeout", "any", 504, "down"),
    *[Row(f"{s} Cloudflare", "any", s, "down", CLOUDFLARE) for s in (520, 521, 522, 523, 524)],
    Row(
        "529 overloaded", "any", 529, "busy", {}, anthropic_error("overloaded_error", "Overloaded")
    ),
    Row("400 a bad request", "any", 400, "wrong", {}, openai_error("bad", "invalid_request", None)),
    Row("404 not found", "any", 404, "wrong"),
    Row("413 request too large", "any", 413, "wrong"),
    Row("422 unprocessable", "any", 422, "wrong"),
    Row("400 x-should-retry true", "any", 400, "busy", {"x-should-retry": "true"}),
    Row("503 x-should-retry false", "any", 503, "wrong", {"x-should-retry": "false"}),
    Row("429 x-should-retry false", "any", 429, "wrong", {"x-should-retry": "false"}),
    Row("401 rejected key", "any", 401, "exhausted"),
    Row(
        "401 rejected key, x-should-retry true", "any", 401, "exhausted", {"x-should-retry": "true"}
    ),
    Row("403 forbidden", "any", 403, "exhausted"),
    Row(
        "openai 429 insufficient_quota",
        *("openai", 429, "exhausted", {}),
        openai_error(OPENAI_QUOTA, "insufficient_quota", "insufficient_quota"),
    ),
    Row(
        "openai 400 context_length_exceeded",
        *("openai", 400, "wrong", {}),
        openai_error("maximum context length", "invalid_request_error", "context_length_exceeded"),
    ),
    Row("openai 402 (OpenRouter credits)", "openai", 402, "exhausted"),
    Row(
        "gemini 429 per-minute quota, RetryInfo 42s",
        *("openai", 429, "busy", {}),
        google_error(
            429,
            "RESOURCE_EXHAUSTED",
            GEMINI_QUOTA,
            [quota_failure(GEMINI_PER_MINUTE), retry_info("42s")],
        ),
    ),
    Row(
        "gemini 429 per-day quota",
        *("openai", 429, "exhausted", {}),
        google_error(429, "RESOURCE_EXHAUSTED", GEMINI_QUOTA, [quota_failure(GEMINI_PER_DAY)]),
    ),
    Row(
        "llama.cpp 500 request validation",
        *("openai", 500, "exhausted", {}),
        openai_error(LLAMA_CPP_VALIDATION, "internal_server_error", None),
    ),
    Row(
        "llama.cpp 500 other validation",
        *("openai", 500, "wrong", {}),
        openai_error("1 validation error for Foo\nbar", "internal_server_error", None),
    ),
    Row(
        "anthropic 429 enforced_spend_limit_reached",
        *("anthropic", 429, "exhausted", {}),
        anthropic_error(
            "rate_limit_error",
            "spend limit",
            details={"error_code": "enforced_spend_limit_reached"},
        ),
    ),
    Row(
        "anthropic 400 credit balance too low",
        *("anthropic", 400, "exhausted", {}),
        anthropic_error("invalid_request_error", ANTHROPIC_CREDIT),
    ),
    Row(
        "anthropic 402 billing_error",
        *("anthropic", 402, "exhausted", {}),
        anthropic_error("billing_error", "Your account has a billing issue."),
    ),
]

#: Where the platform decides otherwise on purpose: (SDK or ``any``, row) -> why.
DIFFERENCES = {
    ("any", "429 retry-after-ms 0 beside Retry-After 10"): (
        "wait: we hold 10 s, the SDKs back off 0.5 s: they stop at the first header they can "
        "parse; the server said when it will serve, and a call after 0.5 s is refused again"
    ),
    ("openai", "429 Retry-After 300"): (
        "retry: openai gives up on a wait over 2 minutes and raises to its caller; a fleet "
        "has no caller to hand it to, so the message waits (the hold, capped at 1 hour)"
    ),
    ("any", "401 rejected key, x-should-retry true"): (
        "retry: a rejected key is exhausted whatever the header: the same key is refused "
        "again, and one worker's retries cost every message a failed call"
    ),
    ("openai", "openai 429 insufficient_quota"): (
        "retry: the SDKs retry every 429; a spent quota does not come back on its own, so "
        "the fleet stops (exhausted, a hold until released)"
    ),
    ("openai", "gemini 429 per-day quota"): (
        "retry: a per-day quota is spent until midnight Pacific: exhausted until then"
    ),
    ("openai", "gemini 429 per-minute quota, RetryInfo 42s"): (
        "wait: we read Google's RetryInfo in the body (42 s); the SDKs read headers only"
    ),
    ("openai", "llama.cpp 500 request validation"): (
        "retry: a server refusing the recipe (here response_format) refuses every call: "
        "exhausted (request_refused), naming the setting to change"
    ),
    ("openai", "llama.cpp 500 other validation"): (
        "retry: a 500 whose message is a request validation error refuses the request, "
        "not the server: wrong, the rules decide it, the breaker counts it"
    ),
    ("anthropic", "anthropic 429 enforced_spend_limit_reached"): (
        "retry: a spend limit reached is exhausted until its reset, not a rate limit"
    ),
}


def header_values(headers: dict[str, str]) -> dict[str, str]:
    """The row's headers, relative dates made real (the SDKs read them against now)."""
    dates = {"in 30 s": time.time() + 30, "30 s ago": time.time() - 30}
    return {
        name: formatdate(dates[value], usegmt=True) if value in dates else value
        for name, value in headers.items()
    }


def ours(api: ApiKind, status: int, headers: dict[str, str], body: bytes) -> AnalyzerError | Busy:
    """What ``HttpAnalyzer`` makes of the answer: the refused recipe, else the refusal."""
    model_api = OpenAiApi("gpt-4o-mini") if api == "openai" else AnthropicApi("claude")
    now = datetime.now(timezone.utc)
    return model_api.misconfigured(status, body) or refusal(api, status, headers, body, now)


def kind_of(error: AnalyzerError | Busy) -> str:
    if isinstance(error, AnalyzerBusy):
        return "busy"
    if isinstance(error, AnalyzerExhausted):
        return "exhausted"
    return "down" if isinstance(error, AnalyzerDown) else "wrong"


def sdk_client(sdk: str) -> Any:
    if sdk == "openai":
        return openai.OpenAI(api_key="sk-test", base_url="http://127.0.0.1:9/v1")
    return anthropic.Anthropic(api_key="sk-ant-test", base_url="http://127.0.0.1:9")


def sdk_options(sdk: str) -> Any:
    options = OpenAiOptions if sdk == "openai" else AnthropicOptions
    return options.construct(method="post", url="/x")


CASES = [(sdk, row) for row in ROWS for sdk in ("openai", "anthropic") if row.api in ("any", sdk)]


@pytest.mark.parametrize(("sdk", "row"), CASES, ids=[f"{s}: {r.id}" for s, r in CASES])
def test_each_row_is_the_sdks_own_retry_decision_or_a_listed_difference(
    sdk: ApiKind, row: Row
) -> None:
    headers = header_values(row.headers)
    error = ours(sdk, row.status, headers, row.body)
    assert kind_of(error) == row.meaning, str(error)
    client = sdk_client(sdk)
    response = httpx2.Response(
        row.status,
        headers=headers,
        content=row.body,
        request=httpx2.Request("POST", "http://127.0.0.1:9/v1/x"),
    )
    retries = client._should_retry(response)
    their_wait = client._calculate_retry_timeout(client.max_retries, sdk_options(sdk), headers)
    agrees = retries == (row.meaning in ("busy", "down"))
    if agrees and row.meaning == "busy":
        our_wait = error.retry_after_s if isinstance(error, AnalyzerBusy) else None
        if our_wait is None:  # no wait given: their first backoff, which ours repeats
            agrees = backoff_s(1, 1.0) <= their_wait <= backoff_s(1, 0.0)
        else:  # an HTTP date (30 s away here) has whole seconds
            agrees = abs(their_wait - our_wait) <= (1.5 if our_wait >= 10 else 0.01)
    reason = DIFFERENCES.get((sdk, row.id), DIFFERENCES.get(("any", row.id)))
    if reason is None:
        assert agrees, f"{sdk} retries={retries} after {their_wait:.2f}s; ours: {error}"
    else:
        assert not agrees, f"listed as a difference but {sdk} agrees: {reason}"


def test_every_difference_names_a_row() -> None:
    ids = {row.id for row in ROWS}
    assert {row for _, row in DIFFERENCES} <= ids


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
@pytest.mark.parametrize("rand", [0.0, 0.37, 0.999])
def test_our_backoff_is_theirs_step_by_step(
    sdk: str, rand: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Their jitter is ``random()`` of their module; fixed here, each of their retries'
    waits (no wait given) equals ours after as many busy answers in a row."""
    base = openai._base_client if sdk == "openai" else anthropic._base_client
    monkeypatch.setattr(base, "random", lambda: rand)
    client = sdk_client(sdk)
    options = sdk_options(sdk).model_copy(update={"max_retries": 10})
    for retry in range(10):
        theirs = client._calculate_retry_timeout(10 - retry, options, httpx2.Headers())
        assert backoff_s(retry + 1, rand) == pytest.approx(theirs), retry
