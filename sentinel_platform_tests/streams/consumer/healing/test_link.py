"""The link's wait between failed turns: doubling, capped, and defined however long the
outage (a float overflow once ended the link's thread after ~1,000 failed turns)."""

from __future__ import annotations

import pytest

from sentinel_platform.streams.consumer.healing.link import retry_delay
from sentinel_platform.streams.consumer.healing.liveness import LINK_RETRY_MAX_S, LINK_RETRY_S


@pytest.mark.parametrize(
    ("failures", "expected"),
    [
        (2, LINK_RETRY_S),
        (3, min(2 * LINK_RETRY_S, LINK_RETRY_MAX_S)),
        (4, min(4 * LINK_RETRY_S, LINK_RETRY_MAX_S)),
        (60, LINK_RETRY_MAX_S),
        (1_100, LINK_RETRY_MAX_S),  # 2 ** 1098 as a float overflowed
        (10**9, LINK_RETRY_MAX_S),
    ],
)
def test_retry_delay_doubles_to_its_cap_and_never_overflows(failures: int, expected: float) -> None:
    assert retry_delay(failures) == pytest.approx(expected)
