"""What an analyzer's answer means, as a table: busy, down or wrong.

Busy (:class:`~sentinel_platform.streams.consumer.processor.Busy`) makes the message wait
and never touches the circuit breaker; down (:class:`AnalyzerDown`) feeds the breaker and
``SENTINEL_ANALYZER_WHEN_DOWN``; wrong (a plain :class:`AnalyzerError`) gets the rules.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from sentinel_platform.streams.consumer.processor import Busy
from workers.analyzer.replies import (
    MAX_RETRY_AFTER_S,
    AnalyzerBusy,
    AnalyzerDown,
    AnalyzerError,
    retry_after_seconds,
    status_error,
)

NOW = datetime(2026, 11, 24, 12, 0, 0, tzinfo=timezone.utc)


@pytest.mark.parametrize(
    ("status", "retry_after", "kind", "seconds"),
    [
        (429, "2", "busy", 2.0),
        (429, None, "busy", None),  # no delay given: the consumer loop picks a backoff
        (429, "soon", "busy", None),  # an invalid header is no header
        (429, "Tue, 24 Nov 2026 12:00:30 GMT", "busy", 30.0),
        (503, "7", "busy", 7.0),
        (503, "Tue, 24 Nov 2026 11:00:00 GMT", "busy", 0.0),  # a past date: come back now
        (503, None, "down", None),  # no Retry-After: an outage, not backpressure
        (503, "1.5", "down", None),  # not a valid delay-seconds
        (500, "5", "down", None),  # only 503 and 429 carry a usable Retry-After
        (502, None, "down", None),
        (504, None, "down", None),
        (400, None, "wrong", None),
        (401, None, "wrong", None),
        (404, "5", "wrong", None),
        (301, None, "wrong", None),
    ],
)
def test_each_status_is_busy_down_or_wrong(
    status: int, retry_after: str | None, kind: str, seconds: float | None
) -> None:
    error = status_error(status, retry_after, NOW)
    assert f"HTTP {status}" in str(error)
    if kind == "busy":
        assert isinstance(error, AnalyzerBusy) and isinstance(error, Busy)
        assert error.retry_after_s == seconds
    elif kind == "down":
        assert isinstance(error, AnalyzerDown)
    else:
        assert isinstance(error, AnalyzerError) and not isinstance(error, AnalyzerDown)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        ("86400", MAX_RETRY_AFTER_S),  # a bogus day-long hold is cut to the cap
        ("Wed, 25 Nov 2026 12:00:00 GMT", MAX_RETRY_AFTER_S),
        ("3600", 3600.0),
        ("Tue, 24 Nov 2026 12:00:30", 30.0),  # no zone: GMT, as RFC 9110 says
    ],
)
def test_retry_after_is_capped_and_read_as_gmt(header: str, seconds: float) -> None:
    assert retry_after_seconds(header, NOW) == seconds


@pytest.mark.parametrize(("given", "kept"), [(None, None), (2.5, 2.5), (-1.0, 0.0), (0, 0.0)])
def test_busy_keeps_a_non_negative_delay_and_its_reason(
    given: float | None, kept: float | None
) -> None:
    busy = Busy(given, "analyzer answered HTTP 429")
    assert (busy.retry_after_s, busy.reason, str(busy)) == (
        kept,
        "analyzer answered HTTP 429",
        "analyzer answered HTTP 429",
    )
