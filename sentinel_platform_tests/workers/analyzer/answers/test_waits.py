"""The decision table of an answer's status and headers, and the wait they give.

Each row is (API, status, headers) and what :func:`workers.analyzer.answers.waits.read_answer`
must make of it: busy (with its wait, None for "no wait given"), down or wrong, and
whether a busy answer counts towards the busy bound. The ``sentinel`` rows are the
platform's own contract (a 503 is busy only with a ``Retry-After``); a wait of 0 or a date
already past is no wait given under every API. ``test_waits_against_sdks.py`` checks the
same meanings against the official SDKs' own retry decisions.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from workers.analyzer.answers.replies import (
    MAX_RETRY_AFTER_S,
    AnalyzerBusy,
    AnalyzerDown,
    AnalyzerError,
)
from workers.analyzer.answers.waits import (
    ApiKind,
    BusyOrDead,
    answer_error,
    header_wait_s,
    read_answer,
)

NOW = datetime(2026, 11, 24, 12, 0, 0, tzinfo=timezone.utc)
PAST = "Tue, 24 Nov 2026 11:00:00 GMT"
IN_30S = "Tue, 24 Nov 2026 12:00:30 GMT"

# (api, status, headers, meaning, wait, bounded)
ROWS: list[tuple[ApiKind, int, dict[str, str], str, float | None, bool]] = [
    # Gateways' and SDK-retried 4xx: busy under every API, not "wrong".
    ("openai", 408, {}, "busy", None, True),
    ("anthropic", 408, {}, "busy", None, True),
    ("sentinel", 408, {}, "busy", None, True),
    ("openai", 409, {}, "busy", None, True),
    ("sentinel", 409, {"retry-after": "2"}, "busy", 2.0, False),
    # 429: busy; a rate limiter's answer never counts towards the bound.
    ("openai", 429, {}, "busy", None, False),
    ("openai", 429, {"retry-after-ms": "150"}, "busy", 0.15, False),
    ("openai", 429, {"retry-after": "20"}, "busy", 20.0, False),
    ("openai", 429, {"retry-after": IN_30S}, "busy", 30.0, False),
    ("anthropic", 429, {"retry-after": "12"}, "busy", 12.0, False),
    ("sentinel", 429, {}, "busy", None, False),
    ("sentinel", 429, {"retry-after": "2"}, "busy", 2.0, False),
    # A wait of 0 or in the past is no wait given (was: "call again now").
    ("openai", 429, {"retry-after-ms": "0"}, "busy", None, False),
    ("openai", 429, {"retry-after": "0"}, "busy", None, False),
    ("openai", 429, {"retry-after": PAST}, "busy", None, False),
    ("sentinel", 429, {"retry-after": "0"}, "busy", None, False),
    # A 0 beside a real wait: the real wait is kept (the SDKs would back off 0.5 s).
    ("openai", 429, {"retry-after-ms": "0", "retry-after": "10"}, "busy", 10.0, False),
    ("openai", 429, {"retry-after-ms": "250", "retry-after": "10"}, "busy", 0.25, False),
    ("openai", 429, {"retry-after": "999999"}, "busy", MAX_RETRY_AFTER_S, False),
    # 503 and 529: busy under the model APIs, bounded without a wait.
    ("openai", 503, {}, "busy", None, True),
    ("openai", 503, {"retry-after": "3"}, "busy", 3.0, False),
    ("openai", 503, {"retry-after": "0"}, "busy", None, True),
    ("anthropic", 529, {}, "busy", None, True),
    ("anthropic", 529, {"retry-after": "4"}, "busy", 4.0, False),
    # sentinel's 503: busy with a Retry-After (today's meaning), down without one.
    ("sentinel", 503, {"retry-after": "7"}, "busy", 7.0, False),
    ("sentinel", 503, {"retry-after": PAST}, "busy", None, True),
    ("sentinel", 503, {}, "down", None, False),
    ("sentinel", 503, {"retry-after": "1.5"}, "down", None, False),  # not delay-seconds
    ("sentinel", 529, {}, "down", None, False),
    # The upstream did not answer: down, at once.
    ("openai", 500, {}, "down", None, False),
    ("openai", 500, {"retry-after": "5"}, "down", None, False),
    ("openai", 502, {}, "down", None, False),
    ("openai", 504, {}, "down", None, False),
    *[("openai", status, {}, "down", None, False) for status in (520, 521, 522, 523, 524)],
    ("anthropic", 500, {}, "down", None, False),
    ("sentinel", 502, {}, "down", None, False),
    ("sentinel", 504, {}, "down", None, False),
    # Refused requests: wrong.
    ("openai", 400, {}, "wrong", None, False),
    ("openai", 404, {"retry-after": "5"}, "wrong", None, False),
    ("openai", 413, {}, "wrong", None, False),
    ("anthropic", 422, {}, "wrong", None, False),
    ("sentinel", 400, {}, "wrong", None, False),
    ("sentinel", 301, {}, "wrong", None, False),
    # The SDKs' own header decides where it is given.
    ("openai", 400, {"x-should-retry": "true"}, "busy", None, True),
    ("anthropic", 400, {"x-should-retry": "true", "retry-after": "2"}, "busy", 2.0, False),
    ("openai", 503, {"x-should-retry": "false"}, "wrong", None, False),
    ("openai", 429, {"x-should-retry": "false", "retry-after": "2"}, "wrong", None, False),
    ("anthropic", 500, {"x-should-retry": "false"}, "wrong", None, False),
    ("openai", 500, {"x-should-retry": "true"}, "down", None, False),
    ("openai", 503, {"x-should-retry": "maybe"}, "busy", None, True),  # not a value: ignored
]


@pytest.mark.parametrize(("api", "status", "headers", "meaning", "wait", "bounded"), ROWS)
def test_each_answer_is_busy_down_or_wrong_with_its_wait(
    api: ApiKind,
    status: int,
    headers: dict[str, str],
    meaning: str,
    wait: float | None,
    bounded: bool,
) -> None:
    reading = read_answer(api, status, headers, NOW)
    assert (reading.meaning, reading.bounded) == (meaning, bounded), reading
    assert reading.wait_s == (None if wait is None else pytest.approx(wait))
    error = answer_error(reading, f"analyzer answered HTTP {status}")
    assert f"HTTP {status}" in str(error)
    if meaning == "busy":
        assert isinstance(error, AnalyzerBusy)
        assert isinstance(error, BusyOrDead) == bounded
        assert error.retry_after_s == reading.wait_s
    elif meaning == "down":
        assert isinstance(error, AnalyzerDown)
    else:
        assert type(error) is AnalyzerError


@pytest.mark.parametrize(
    ("headers", "body_delay", "wait"),
    [
        ({}, None, None),
        ({}, 42.0, 42.0),  # Google's RetryInfo, last
        ({"retry-after-ms": "0"}, 42.0, 42.0),
        ({"retry-after-ms": "-1", "retry-after": "-3"}, None, None),
        ({"retry-after-ms": "inf"}, None, None),
        ({"retry-after-ms": "0.4"}, None, 0.0004),
        ({"retry-after": "soon"}, 0.0, None),
        ({"retry-after": PAST, "retry-after-ms": "0"}, None, None),
    ],
)
def test_the_first_wait_above_zero_is_the_wait(
    headers: dict[str, str], body_delay: float | None, wait: float | None
) -> None:
    assert header_wait_s(headers, NOW, body_delay) == (
        None if wait is None else pytest.approx(wait)
    )
