"""What an analyzer's answer carries: its ``Retry-After``, and a busy answer's delay.

Which status is busy, down or wrong is the table of ``test_waits.py``.
"""

from __future__ import annotations

from datetime import datetime, timezone

import pytest

from sentinel_platform.streams.consumer.processor import Busy
from workers.analyzer.answers.replies import MAX_RETRY_AFTER_S, retry_after_seconds

NOW = datetime(2026, 11, 24, 12, 0, 0, tzinfo=timezone.utc)


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
