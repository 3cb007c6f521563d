"""One worker's limit shared by the consumers of its shards: the split, and what the
limit learns (``calling.shared_limit``)."""

from __future__ import annotations

import pytest

from sentinel_platform.streams.consumer.calling.concurrency_limit import FixedLimit
from sentinel_platform.streams.consumer.calling.shared_limit import SharedLimit, share


@pytest.mark.parametrize(
    ("total", "shards", "expected"),
    [
        (1, 1, [1]),
        (32, 1, [32]),
        (9, 3, [3, 3, 3]),
        (10, 3, [4, 3, 3]),
        (11, 3, [4, 4, 3]),
        (2, 3, [1, 1, 1]),  # never below one: every shard is served
        (0, 2, [1, 1]),
    ],
)
def test_the_limit_is_split_as_evenly_as_whole_calls_allow(
    total: int, shards: int, expected: list[int]
) -> None:
    parts = [share(total, shards, k) for k in range(shards)]
    assert parts == expected
    if total >= shards:
        assert sum(parts) == total


@pytest.mark.parametrize(("shards", "shard"), [(0, 0), (3, 3), (3, -1)])
def test_a_shard_outside_the_stream_is_refused(shards: int, shard: int) -> None:
    with pytest.raises(ValueError, match=f"shard {shard} of {shards}"):
        share(4, shards, shard)


class Recording(FixedLimit):
    """A fixed limit that keeps what it is told."""

    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.told: list[tuple[str, int]] = []

    def on_sample(self, rtt_s: float, in_flight: int) -> None:
        self.told.append(("sample", in_flight))

    def on_drop(self, in_flight: int, rtt_s: float) -> None:
        self.told.append(("drop", in_flight))


def test_each_share_tells_the_limit_the_calls_of_the_whole_worker() -> None:
    inner = Recording(7)
    shared = SharedLimit(inner, 3)
    shares = [shared.for_shard(k) for k in range(3)]
    running = [2, 3, 1]
    for k, part in enumerate(shares):
        part.count_running(lambda k=k: running[k])
    assert [part.limit for part in shares] == [3, 2, 2]
    assert [part.steady_limit for part in shares] == [3, 2, 2]

    shares[0].on_sample(0.5, 2)  # its own 2, with the others' 3 + 1
    shares[2].on_drop(1, 0.5)
    assert inner.told == [("sample", 6), ("drop", 6)]
    with pytest.raises(ValueError):
        shared.for_shard(3)
