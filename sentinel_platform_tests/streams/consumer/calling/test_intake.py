"""The room a worker has for more messages, from tables: slow calls are read ahead in
batches while the stream is backlogged, fast ones take a whole read, untimed ones a
message per free run."""

from __future__ import annotations

import pytest

from sentinel_platform.streams.consumer.calling.intake import room_for

SLOW, FAST = 0.1, 0.000_001


@pytest.mark.parametrize(
    ("limit", "running", "waiting", "count", "latency", "room"),
    [
        # slow calls: a read of the read-ahead once the backlog ran out, none before
        (32, 32, 0, 100, SLOW, 16),
        (32, 32, 1, 100, SLOW, 0),
        (32, 32, 16, 100, SLOW, 0),
        (32, 30, 0, 100, SLOW, 18),
        (32, 32, 0, 10, SLOW, 0),  # never more held than the larger of limit and read
        (90, 90, 0, 100, SLOW, 10),
        (8, 12, 0, 100, SLOW, 0),  # the limit was cut below what runs
        (3, 3, 0, 100, SLOW, 1),
        (3, 2, 0, 100, SLOW, 2),
        # a limit of one reads no further: one call at a time holds one message
        (1, 1, 0, 100, SLOW, 0),
        (1, 0, 0, 100, SLOW, 1),
        # untimed: a message per free run (neighbours share a read), a whole read at 1
        (32, 0, 0, 100, None, 32),
        (32, 32, 0, 100, None, 0),
        (1, 0, 0, 100, None, 100),
        # fast calls: a run takes a whole read
        (4, 0, 0, 100, FAST, 100),
        (4, 4, 0, 100, FAST, 0),
    ],
)
def test_room_reads_slow_calls_ahead_in_batches(
    limit: int, running: int, waiting: int, count: int, latency: float | None, room: int
) -> None:
    assert room_for(limit, running, waiting, count, latency, backlogged=True) == room


@pytest.mark.parametrize(
    ("limit", "running", "waiting", "room"),
    [(32, 32, 0, 0), (32, 30, 0, 2), (4, 0, 0, 4), (4, 2, 1, 1)],
)
def test_no_read_ahead_unless_the_last_read_was_full(
    limit: int, running: int, waiting: int, room: int
) -> None:
    """A burst smaller than the fleet's free runs is spread over the workers: a worker
    takes what its free runs can call, no more, until a read comes back full."""
    assert room_for(limit, running, waiting, 100, SLOW, backlogged=False) == room
