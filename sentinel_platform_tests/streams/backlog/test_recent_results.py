"""One read of the newest results serves a narrower window: on a real server, what
:meth:`RecentResults.within` gives is what a read of that window and cap returns."""

from __future__ import annotations

import pytest

from sentinel_platform.streams.backlog.entry_ages import server_now_s
from sentinel_platform.streams.backlog.recent_results import read_recent
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.replies import entries

KEY = "sentinel:verdicts"
#: Seconds before now each entry was stamped: outside 6 h, inside 6 h, inside 5 min.
AGES_S = (8 * 3600, 5 * 3600, 2 * 3600, 240, 200, 120, 60, 30)


@pytest.mark.parametrize(
    ("window_s", "cap"), [(300, 2), (300, 6), (3 * 3600, 5), (6 * 3600, 4), (300, 10)]
)
def test_a_narrower_window_is_what_its_own_read_returns(
    redis_client: RedisClient, window_s: int, cap: int
) -> None:
    now_ms = int(server_now_s(redis_client) * 1000)
    for n, age in enumerate(AGES_S):
        redis_client.xadd(KEY, {"n": str(n)}, id=f"{now_ms - age * 1000}-0")
    other = "sentinel:verdicts:other"
    redis_client.xadd(other, {"n": "x"}, id=f"{now_ms - 10_000}-0")
    recent = read_recent(redis_client, [KEY, other, KEY], 6 * 3600, 6)
    assert len(recent.by_key) == 2, "each key read once"
    since = str(recent.now_ms - window_s * 1000)
    own = entries(redis_client.xrevrange(KEY, max="+", min=since, count=cap))
    if cap > recent.cap:
        with pytest.raises(ValueError):
            recent.within(window_s, cap)
        return
    narrowed, of_other = recent.within(window_s, cap)
    assert narrowed == own and len(of_other) == 1
    assert [fields["n"] for _, fields in narrowed][:2] == ["7", "6"], "newest first"


def test_a_key_holding_something_else_reads_as_none(redis_client: RedisClient) -> None:
    redis_client.set(KEY, "not a stream")
    assert read_recent(redis_client, [KEY], 300, 10).within(300, 10) == [[]]
