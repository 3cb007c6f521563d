"""The analyzer's holds as operators read and end them: the stored record read back
(table-tested, an older worker's plain value included), and on the suite's real Redis
the registry, a hold with and without an end, and a release."""

from __future__ import annotations

import json

import pytest

from sentinel_platform.streams.operators import analyzer_holds as holds
from sentinel_platform.streams.plumbing.connection import RedisClient

SECRET = "Pr0xy-S3cret"


@pytest.mark.parametrize(
    ("raw", "left_ms", "expected"),
    [
        (None, -2, None),  # no key
        ("HTTP 429 (5s)", 4_000, ("retry_after", "HTTP 429 (5s)", 4.0)),  # an older worker's
        (
            json.dumps({"cause": "exhausted", "reason": "quota used up", "analyzer": "x"}),
            -1,
            ("exhausted", "quota used up", None),  # no TTL: until released
        ),
        ('{"reason": "no cause"}', 1_500, ("retry_after", "no cause", 1.5)),
        ("[1, 2]", 10, ("retry_after", "[1, 2]", 0.01)),  # not a record: its text
    ],
)
def test_a_stored_hold_reads_back_as_cause_reason_and_seconds_left(
    raw: str | None, left_ms: int, expected: tuple[str, str, float | None] | None
) -> None:
    hold = holds.decode_hold("svc", raw, left_ms)
    if expected is None:
        assert hold is None
        return
    assert hold is not None and hold.analyzer_id == "svc"
    assert (hold.cause, hold.reason, hold.seconds_left) == expected


def test_the_record_shows_the_analyzer_redacted() -> None:
    url = f"https://bot:{SECRET}@api.example.com/v1?api_key={SECRET}"
    raw = holds.encode_hold("gpt-eu", url, "retry_after", "HTTP 429", 30.0)
    assert SECRET not in raw
    hold = holds.decode_hold("gpt-eu", raw, 29_500)
    assert hold is not None and hold.analyzer.startswith("https://bot:***@api.example.com")
    assert holds.hold_text(hold).startswith("gpt-eu (https://bot:***@api.example.com")
    assert "retry_after, 30 s left: HTTP 429" in holds.hold_text(hold)


def test_operators_find_every_registered_hold_and_release_them(redis_client: RedisClient) -> None:
    holds.register(redis_client, "svc-a", "https://a.example.com/v1")
    holds.register(redis_client, "svc-b", f"https://bot:{SECRET}@b.example.com/v1")
    holds.register(redis_client, "svc-idle", "https://idle.example.com/v1")
    redis_client.set(holds.hold_key("svc-a"), "HTTP 429", px=60_000)  # an older worker's
    endless = holds.encode_hold("svc-b", "", "exhausted", "quota", None)
    redis_client.set(holds.hold_key("svc-b"), endless)
    redis_client.set(holds.hold_key("unregistered"), "HTTP 429", px=60_000)
    found = holds.read_holds(redis_client, also=["unregistered"])
    assert [(h.analyzer_id, h.cause) for h in found] == [
        ("svc-a", "retry_after"),
        ("svc-b", "exhausted"),
        ("unregistered", "retry_after"),
    ]
    assert found[0].analyzer == "https://a.example.com/v1"  # the registry's, for an old value
    assert found[1].seconds_left is None and SECRET not in found[1].analyzer
    assert holds.release(redis_client, ["svc-a", "svc-idle"]) == ["svc-a"]
    assert [h.analyzer_id for h in holds.read_holds(redis_client)] == ["svc-b"]
