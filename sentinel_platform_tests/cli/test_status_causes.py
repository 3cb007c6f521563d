"""Why the rules decided, as ``sentinel status`` names it: a spent daily budget is not a
failing analyzer (:func:`~sentinel_platform.cli.status_causes.fallback_cause`)."""

from __future__ import annotations

from typing import Any

import pytest

from sentinel_platform.cli.status_causes import FAILING, fallback_cause, hold_remedy


def _hold(cause: str, reason: str, key_digest: str = "") -> dict[str, Any]:
    return {
        "analyzer_id": "gpt-eu",
        "analyzer": "https://api.example.com/v1",
        "cause": cause,
        "reason": reason,
        "seconds_left": 3600.0,
        "set_at": None,
        "key": "sk-...abcd" if key_digest else "",
        "key_digest": key_digest,
    }


DAILY = _hold("exhausted", "daily_tokens: daily token budget spent (900 of ...=900)")
QUOTA = _hold("exhausted", "insufficient_quota: You exceeded your current quota")
KEY = _hold("exhausted", "rejected_key: Incorrect API key provided", key_digest="d1")
BUSY = _hold("retry_after", "HTTP 429")

CASES = [
    # (fallback causes, holds, the words expected in the cause)
    ({}, [], FAILING),
    ({"unknown": 9}, [], FAILING),  # results written before fallback_cause
    ({"exhausted": 9}, [DAILY], "daily token budget of analyzer gpt-eu is spent"),
    ({}, [QUOTA, DAILY], "SENTINEL_ANALYZER_DAILY_TOKENS"),  # the budget named first
    ({"exhausted": 9}, [QUOTA], "gpt-eu is exhausted (insufficient_quota)"),
    ({"exhausted": 9}, [KEY, QUOTA], "gpt-eu is exhausted (insufficient_quota)"),
    ({"exhausted": 9}, [KEY], "holds its key sk-...abcd (rejected_key)"),
    ({"over_budget": 7, "down": 2}, [], "SENTINEL_ANALYZER_DAILY_TOKENS"),
    ({"down": 2, "breaker_open": 7}, [BUSY], "circuit breaker is open"),
    ({"down": 7, "unknown": 9}, [], "the analyzer is down"),
    # the batch lane's causes are named for what the provider did
    ({"batch_expired": 5, "down": 1}, [], "expired at the provider"),
    ({"batch_errored": 3}, [], "errored at the provider"),
    ({"batch_canceled": 3}, [], "canceled at the provider"),
    ({"batch_unanswered": 3}, [], "left unanswered by the provider"),
    ({"batch_failed": 3}, [], "a batch that failed as a whole"),
    ({"batch_refused": 3}, [], "a batch the provider refused"),
]


@pytest.mark.parametrize(("causes", "holds", "expected"), CASES)
def test_fallback_cause(causes: dict[str, int], holds: list[dict[str, Any]], expected: str) -> None:
    said = fallback_cause(causes, holds)
    assert expected in said, said
    if expected != FAILING:
        assert FAILING not in said


@pytest.mark.parametrize(
    ("hold", "expected"),
    [
        (DAILY, "refills at midnight UTC"),
        (QUOTA, "`sentinel analyzer release`"),
        (_hold("announced_limit", "x-ratelimit"), "announced budget refills"),
        (BUSY, "SENTINEL_ANALYZER_RATE_LIMIT"),
    ],
)
def test_hold_remedy(hold: dict[str, Any], expected: str) -> None:
    assert expected in hold_remedy(hold)
