"""What a model API's refusal means: wait (busy), stop (exhausted), down or wrong.

One pure function per answer, :func:`refusal`, from the API's kind, the HTTP status, the
headers and the (capped) body, so every documented answer of every provider is one row of
a table test. The meanings are those of :mod:`workers.analyzer.answers.replies`:

* **busy** (:class:`~workers.analyzer.answers.replies.AnalyzerBusy`): the API is up and at
  capacity; the message waits. Which answers are busy, and the wait they give, is the
  table of :mod:`workers.analyzer.answers.waits` (a wait of 0 or a past date is none given).
* **exhausted** (:class:`~workers.analyzer.answers.replies.AnalyzerExhausted`): retrying cannot
  help until something changes outside the fleet (a quota or spend limit spent, a credit
  balance empty, a per-day quota used up, a key rejected). Matched on what the provider
  documents as the cause, never on the status alone: OpenAI's ``insufficient_quota`` is
  a 429 like any rate limit, and Anthropic's spend limits come as 429 and as 400.
* **down** (:class:`~workers.analyzer.answers.replies.AnalyzerDown`) and **wrong** (a plain
  :class:`~workers.analyzer.answers.replies.AnalyzerError`), as before.

A rejected key (401, 403) is exhausted under every API, ``sentinel`` included: it is a
misconfiguration, not an outage, and asking again with the same key only repeats it.
Otherwise ``sentinel`` answers are read by their status and headers only
(:func:`~workers.analyzer.answers.waits.read_answer`: a 503 without ``Retry-After`` is down).
Under ``openai`` and ``anthropic`` a 503 and a 529 are busy whatever their headers:
self-hosted servers (Ollama, vLLM) answer 503 when their queue is full and Anthropic 529
when it is overloaded; one that answers nothing else for too long is down
(:mod:`workers.analyzer.answers.busy_spell`).

A message never carries the raw body: only the provider's error type and code and the
first :data:`MESSAGE_MAX_CHARS` of its message, key-shaped tokens masked and the text
scrubbed (:func:`~sentinel_platform.redaction.scrub`); a rejected key's message is left
out altogether, since providers echo part of the key in it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from typing import Any
from zoneinfo import ZoneInfo

from sentinel_platform.redaction import MASK, scrub
from sentinel_platform.streams.consumer.processor import Busy
from workers.analyzer.answers.replies import AnalyzerError, AnalyzerExhausted
from workers.analyzer.answers.waits import ApiKind, answer_error, header_wait_s, read_answer

#: The provider's own message is cut to this in ours: enough to say why, never a dump.
MESSAGE_MAX_CHARS = 200
#: Per-day Gemini quotas reset at midnight in this zone (Gemini's rate-limits page).
QUOTA_DAY_ZONE = "America/Los_Angeles"
#: The causes of an exhaustion, short words safe as a metric label.
CAUSES = ("rejected_key", "insufficient_quota", "spend_limit", "credit_balance", "daily_quota")
#: Tokens shaped like an API key (OpenAI ``sk-``, Anthropic ``sk-ant-``, Google ``AIza``).
_KEY_SHAPED = re.compile(r"\b(?:sk-[A-Za-z0-9_*.-]{4,}|AIza[0-9A-Za-z_-]{8,})")
#: Anthropic's 400 for a spend limit or an empty balance says so in its message only.
_SPEND_LIMIT = re.compile(r"spend limit|usage limits?", re.IGNORECASE)
_CREDIT = re.compile(r"credit balance|credits?\b.*\b(?:low|exhausted|insufficient)", re.I)
#: "You will regain access on 2026-12-01 at 00:00 UTC": a reset the answer gives.
_REGAIN = re.compile(r"regain access on (\d{4}-\d{2}-\d{2}) at (\d{2}:\d{2}) UTC")
#: A Google duration: ``"42s"``, ``"10.689924287s"``.
_GOOGLE_DURATION = re.compile(r"([0-9]+(?:\.[0-9]+)?)s")
#: Pydantic's wording, as llama.cpp's server (llama-cpp-python) answers a request it
#: cannot parse with HTTP 500: the request is refused, the server is not down.
_VALIDATION = re.compile(r"validation errors? for ", re.IGNORECASE)


@dataclass(frozen=True)
class ErrorBody:
    """What a provider's error body says, whatever its dialect: OpenAI's
    ``{"error": {"type", "code", "message"}}``, Anthropic's ``{"type": "error", "error":
    {"type", "message", "details": {"error_code"}}}``, Google's ``{"error": {"status",
    "message", "details": [QuotaFailure, RetryInfo, ErrorInfo]}}`` (a one-element list of
    it on Gemini's OpenAI-compatible endpoint) and Ollama's ``{"error": "text"}``."""

    type: str = ""
    code: str = ""
    status: str = ""
    message: str = ""
    quota_ids: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    retry_delay_s: float | None = None


def refusal(
    api: ApiKind, status: int, headers: Mapping[str, str], body: bytes, now: datetime
) -> AnalyzerError | Busy:
    """The error a non-2xx answer of ``api`` means (the body is read and capped by the
    caller; it may be empty). ``now`` is an aware UTC time, for HTTP dates and resets."""
    lower = {name.lower(): value for name, value in headers.items()}
    error = error_body(body)
    if status in (401, 403) or "API_KEY_INVALID" in error.reasons:
        why = f"analyzer rejected the credentials (HTTP {status}{_kind(error)}): check the key"
        return AnalyzerExhausted(why, None, "rejected_key")
    if api == "sentinel":  # its own contract: the status and headers only
        return answer_error(
            read_answer(api, status, lower, now), f"analyzer answered HTTP {status}"
        )
    exhausted = exhaustion(status, error, now)
    if exhausted is not None:
        return exhausted
    said = describe_error(status, error)
    if 500 <= status < 600 and _VALIDATION.search(error.message):
        return AnalyzerError(f"{said} (the request was refused: not retried)")
    return answer_error(read_answer(api, status, lower, now, error.retry_delay_s), said)


def exhaustion(status: int, error: ErrorBody, now: datetime) -> AnalyzerExhausted | None:
    """The exhaustion a provider's answer documents, or None: OpenAI's 429 whose error
    type is ``insufficient_quota`` (whichever code: ``credit_balance_exhausted``,
    ``*_spend_limit_exceeded``, ...), Anthropic's ``enforced_spend_limit_reached`` and its
    400 ``invalid_request_error`` for a spend limit or a low credit balance, a 402
    (Anthropic's ``billing_error``, OpenRouter's credits), a Gemini quota per day."""
    said = describe_error(status, error)
    if status == 429 and "insufficient_quota" in (error.type, error.code):
        return AnalyzerExhausted(said, None, "insufficient_quota")
    if error.code == "enforced_spend_limit_reached":
        return AnalyzerExhausted(said, regain_in_s(error.message, now), "spend_limit")
    if status == 402:
        return AnalyzerExhausted(said, None, "credit_balance")
    if status == 400 and error.type == "invalid_request_error":
        if _CREDIT.search(error.message):
            return AnalyzerExhausted(said, None, "credit_balance")
        if _SPEND_LIMIT.search(error.message):
            return AnalyzerExhausted(said, regain_in_s(error.message, now), "spend_limit")
    if status == 429 and any("perday" in quota.lower() for quota in error.quota_ids):
        return AnalyzerExhausted(said, seconds_to_quota_day_end(now), "daily_quota")
    return None


def busy_wait_s(headers: Mapping[str, str], error: ErrorBody, now: datetime) -> float | None:
    """Seconds a busy answer asks to wait (:func:`~workers.analyzer.answers.waits.header_wait_s`):
    ``retry-after-ms``, ``Retry-After``, then the body's ``RetryInfo.retryDelay``, the
    first above 0. None when none gives one: the caller backs off. ``headers`` are
    lower-cased."""
    return header_wait_s(headers, now, error.retry_delay_s)


def error_body(body: bytes) -> ErrorBody:
    """The fields of a provider's error body (:class:`ErrorBody`); an empty one for a body
    that is empty, not JSON or of no known dialect."""
    try:
        parsed: Any = json.loads(body) if body.strip() else None
    except (UnicodeDecodeError, ValueError):
        return ErrorBody()
    if isinstance(parsed, list) and parsed:
        parsed = parsed[0]
    error = parsed.get("error") if isinstance(parsed, dict) else None
    if isinstance(error, str):
        return ErrorBody(message=error)
    if not isinstance(error, dict):
        return ErrorBody()
    details = error.get("details")
    details_list = details if isinstance(details, list) else []
    code = error.get("code")
    if isinstance(details, dict):  # Anthropic: {"error_code": ...}
        code = details.get("error_code") or code
    return ErrorBody(
        type=_text(error.get("type")),
        code=_text(code),
        status=_text(error.get("status")),
        message=_text(error.get("message")),
        quota_ids=tuple(_google_quota_ids(details_list)),
        reasons=tuple(_google_reasons(details_list)),
        retry_delay_s=_google_retry_delay(details_list),
    )


def describe_error(status: int, error: ErrorBody) -> str:
    """``analyzer answered HTTP 429 (insufficient_quota/credit_balance_exhausted): You
    exceeded...``: the status, the provider's type and code, and its message cut and
    cleaned (key-shaped tokens masked, then scrubbed)."""
    message = cleaned(error.message)
    said = f"analyzer answered HTTP {status}{_kind(error)}"
    return scrub(f"{said}: {message}" if message else said)


def cleaned(message: str) -> str:
    """A provider's own message as ours may quote it: on one line, key-shaped tokens
    masked, cut at :data:`MESSAGE_MAX_CHARS` (the caller scrubs the whole text)."""
    message = _KEY_SHAPED.sub(MASK, " ".join(message.split()))
    if len(message) > MESSAGE_MAX_CHARS:
        message = message[:MESSAGE_MAX_CHARS] + "..."
    return message


def seconds_to_quota_day_end(now: datetime) -> float:
    """Seconds from ``now`` to the next midnight in :data:`QUOTA_DAY_ZONE`, when a
    per-day Gemini quota resets (daylight saving included)."""
    local = now.astimezone(ZoneInfo(QUOTA_DAY_ZONE))
    midnight = datetime.combine(local.date() + timedelta(days=1), datetime.min.time())
    end = midnight.replace(tzinfo=local.tzinfo)
    return max(0.0, (end.astimezone(timezone.utc) - now).total_seconds())


def regain_in_s(message: str, now: datetime) -> float | None:
    """Seconds until the ``regain access on YYYY-MM-DD at HH:MM UTC`` an Anthropic spend
    limit names, or None (until released) when it names none."""
    found = _REGAIN.search(message)
    if found is None:
        return None
    try:
        when = datetime.fromisoformat(f"{found[1]}T{found[2]}:00+00:00")
    except ValueError:
        return None
    return max(0.0, (when - now).total_seconds())


def _kind(error: ErrorBody) -> str:
    words = [w for w in dict.fromkeys((error.type, error.code, error.status)) if w]
    return f" ({'/'.join(_KEY_SHAPED.sub(MASK, w)[:60] for w in words)})" if words else ""


def _text(value: object) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def _google_quota_ids(details: list[Any]) -> list[str]:
    ids: list[str] = []
    for detail in details:
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("QuotaFailure"):
            for violation in detail.get("violations") or []:
                if isinstance(violation, dict):
                    ids.append(_text(violation.get("quotaId")))
    return ids


def _google_reasons(details: list[Any]) -> list[str]:
    return [
        _text(detail.get("reason"))
        for detail in details
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("ErrorInfo")
    ]


def _google_retry_delay(details: list[Any]) -> float | None:
    for detail in details:
        if isinstance(detail, dict) and str(detail.get("@type", "")).endswith("RetryInfo"):
            found = _GOOGLE_DURATION.fullmatch(_text(detail.get("retryDelay")).strip())
            if found:
                return float(found[1])
    return None
