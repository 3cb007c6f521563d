"""The rate limits an answer announces, read from each dialect's documented headers.

OpenAI: platform.openai.com/docs/guides/rate-limits ("Rate limits in headers": the
``x-ratelimit-*`` headers, resets as durations such as ``1s`` and ``6m0s``); Anthropic:
docs.anthropic.com/en/api/rate-limits ("Response headers": ``anthropic-ratelimit-*``,
resets in RFC 3339 format).
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from workers.analyzer.answers.announced_limits import (
    AnnouncedLimits,
    Budget,
    announced_limits,
    go_duration_s,
    rfc3339_in_s,
)

NOW = datetime(2026, 11, 27, 5, 0, 0, tzinfo=timezone.utc)

#: OpenAI's documented example of its headers.
OPENAI = {
    "x-ratelimit-limit-requests": "60",
    "x-ratelimit-limit-tokens": "150000",
    "x-ratelimit-remaining-requests": "59",
    "x-ratelimit-remaining-tokens": "149984",
    "x-ratelimit-reset-requests": "1s",
    "x-ratelimit-reset-tokens": "6m0s",
}
#: Anthropic's headers, as its rate-limits page lists them.
ANTHROPIC = {
    "anthropic-ratelimit-requests-limit": "50",
    "anthropic-ratelimit-requests-remaining": "49",
    "anthropic-ratelimit-requests-reset": "2026-11-27T05:00:01Z",
    "anthropic-ratelimit-tokens-limit": "90000",
    "anthropic-ratelimit-tokens-remaining": "89000",
    "anthropic-ratelimit-tokens-reset": "2026-11-27T05:00:30Z",
    "anthropic-ratelimit-input-tokens-limit": "50000",
    "anthropic-ratelimit-input-tokens-remaining": "49500",
    "anthropic-ratelimit-input-tokens-reset": "2026-11-27T05:00:30.500Z",
    "anthropic-ratelimit-output-tokens-limit": "10000",
    "anthropic-ratelimit-output-tokens-remaining": "9500",
    "anthropic-ratelimit-output-tokens-reset": "2026-11-27T06:00:00+01:00",
}


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        (
            OPENAI,
            AnnouncedLimits(requests=Budget(60, 59, 1.0), tokens=Budget(150000, 149984, 360.0)),
        ),
        (
            ANTHROPIC,
            AnnouncedLimits(
                requests=Budget(50, 49, 1.0),
                tokens=Budget(90000, 89000, 30.0),
                input_tokens=Budget(50000, 49500, 30.5),
                output_tokens=Budget(10000, 9500, 0.0),  # 05:00 UTC: refilled now
            ),
        ),
        (  # header names are case-insensitive (HTTP/1.1 proxies may capitalise them)
            {"X-RateLimit-Remaining-Tokens": "12", "X-RateLimit-Reset-Tokens": "23h47m36.648s"},
            AnnouncedLimits(tokens=Budget(None, 12, 23 * 3600 + 47 * 60 + 36.648)),
        ),
        (  # a malformed value leaves its field unknown, the rest is kept
            {"x-ratelimit-limit-tokens": "lots", "x-ratelimit-remaining-tokens": "-3"},
            AnnouncedLimits(tokens=Budget(None, None, None)),
        ),
        ({}, AnnouncedLimits()),
        ({"content-type": "application/json", "retry-after": "3"}, AnnouncedLimits()),
    ],
    ids=["openai", "anthropic", "case and long reset", "malformed", "none", "others only"],
)
def test_announced_limits_of_each_dialect(
    headers: dict[str, str], expected: AnnouncedLimits
) -> None:
    limits = announced_limits(headers, NOW)
    assert limits == expected
    assert limits.any == (expected != AnnouncedLimits())


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("1s", 1.0),
        ("6m0s", 360.0),
        ("23h47m36.648s", 85656.648),
        ("20ms", 0.02),
        ("1.5h", 5400.0),
        ("150us", 0.00015),
        ("0", 0.0),
        ("0s", 0.0),
        ("", None),
        (None, None),
        ("5", None),  # no unit: not a duration
        ("-1s", None),
        ("1s 2m", None),
        ("1d", None),
        ("s", None),
    ],
)
def test_go_durations(text: str | None, seconds: float | None) -> None:
    assert go_duration_s(text) == (None if seconds is None else pytest.approx(seconds))


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("2026-11-27T05:00:30Z", 30.0),
        ("2026-11-27T05:00:30.250Z", 30.25),
        ("2026-11-27T06:00:30+01:00", 30.0),
        ("2026-11-27T04:59:00Z", 0.0),  # past: refilled
        ("tomorrow", None),
        ("", None),
    ],
)
def test_rfc3339_resets(text: str, seconds: float | None) -> None:
    assert rfc3339_in_s(text, NOW) == (None if seconds is None else pytest.approx(seconds))
