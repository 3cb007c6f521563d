"""A stream's provisional backlog over its shards: summed, the oldest age the largest."""

from __future__ import annotations

import pytest

from sentinel_platform.streams.backlog.provisional import NOTHING, ProvisionalBacklog
from sentinel_platform.streams.backlog.provisional_shards import combined

B = ProvisionalBacklog


@pytest.mark.parametrize(
    ("shards", "total"),
    [
        ([], NOTHING),
        ([NOTHING, NOTHING], NOTHING),
        ([B(3, 12.5)], B(3, 12.5)),
        ([B(3, 10.0), NOTHING], B(3, 10.0)),
        ([B(3, 12.5), NOTHING, B(2, 40.0)], B(5, 40.0)),
        ([B(3, 10.0), B(2, 70.5)], B(5, 70.5)),
        ([B(1, None), B(2, 4.0)], B(3, 4.0)),
    ],
)
def test_the_shards_backlogs_add_up_to_the_streams(
    shards: list[ProvisionalBacklog], total: ProvisionalBacklog
) -> None:
    assert combined(shards) == total
