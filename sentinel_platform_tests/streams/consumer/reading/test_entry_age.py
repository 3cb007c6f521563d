"""With retention off an entry's age is unbounded: one older than its idempotency marker's
TTL (less a margin) must not be applied, as its marker may have expired."""

from __future__ import annotations

import pytest

from sentinel_platform.streams.consumer.reading.entry_age import (
    EXPIRED_MARKER_ERROR,
    margin_ms,
    too_old,
)

DAY_S = 86_400
WEEK_S = 7 * DAY_S
NOW_MS = 1_800_000_000_000


def aged(ms: int) -> str:
    """The id of an entry added ``ms`` milliseconds before ``NOW_MS``."""
    return f"{NOW_MS - ms}-0"


@pytest.mark.parametrize(
    ("message_id", "ttl_s", "retention_enabled", "expected"),
    [
        pytest.param("1000-0", WEEK_S, False, True, id="ancient-entry-retention-off"),
        pytest.param("1000-0", WEEK_S, True, False, id="retention-on-never-too-old"),
        pytest.param(aged(1_000), WEEK_S, False, False, id="fresh-entry"),
        pytest.param(
            aged(WEEK_S * 1000 - 3_600_000 - 1), WEEK_S, False, False, id="just-inside-margin"
        ),
        pytest.param(aged(WEEK_S * 1000 - 3_600_000), WEEK_S, False, True, id="margin-reached"),
        pytest.param(aged(WEEK_S * 1000 + 5), WEEK_S, False, True, id="past-the-ttl"),
        pytest.param(aged(53_999), 60, False, False, id="short-ttl-inside-tenth-margin"),
        pytest.param(aged(54_000), 60, False, True, id="short-ttl-margin-is-a-tenth"),
        pytest.param(f"{NOW_MS + 60_000}-3", 60, False, False, id="id-ahead-of-our-clock"),
        pytest.param(f"{NOW_MS - 100_000}", 60, False, True, id="id-without-sequence"),
    ],
)
def test_an_entry_is_too_old_only_with_retention_off_and_past_its_marker_ttl(
    message_id: str, ttl_s: int, retention_enabled: bool, expected: bool
) -> None:
    assert too_old(message_id, NOW_MS, ttl_s, retention_enabled) is expected


@pytest.mark.parametrize(
    ("ttl_s", "expected_ms"),
    [(60, 6_000), (3600, 360_000), (DAY_S, 3_600_000), (WEEK_S, 3_600_000)],
)
def test_the_margin_is_a_tenth_of_the_ttl_capped_at_an_hour(ttl_s: int, expected_ms: int) -> None:
    assert margin_ms(ttl_s) == expected_ms


def test_the_dead_letter_error_names_the_settings_and_what_to_do() -> None:
    for words in (
        "SENTINEL_IDEMPOTENCY_TTL_S",
        "SENTINEL_STREAM_RETENTION_ENABLED",
        "apply its effect twice",
        "sentinel dlq replay",
    ):
        assert words in EXPIRED_MARKER_ERROR
