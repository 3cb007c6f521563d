"""When the batch lane submits what it gathered and when it polls a batch (pure)."""

from __future__ import annotations

import pytest

from workers.batchlane.pacing import next_poll_s, submit_now


@pytest.mark.parametrize(
    ("previous", "first", "ceiling", "expected"),
    [
        (None, 60.0, 600.0, 60.0),  # the first poll waits the first interval
        (60.0, 60.0, 600.0, 120.0),  # each poll of a running batch doubles the wait
        (400.0, 60.0, 600.0, 600.0),  # never above the ceiling
        (600.0, 60.0, 600.0, 600.0),
        (10.0, 60.0, 600.0, 60.0),  # never below the first interval
        (None, 60.0, 30.0, 60.0),  # a ceiling below the first interval: the first wins
        (60.0, 60.0, 30.0, 60.0),
    ],
)
def test_the_wait_between_polls_grows_bounded(
    previous: float | None, first: float, ceiling: float, expected: float
) -> None:
    assert next_poll_s(previous, first, ceiling) == expected


@pytest.mark.parametrize(
    ("gathered", "full", "quiet", "oldest", "held", "expected"),
    [
        (0, 100, 99.0, 99.0, False, False),  # nothing to submit
        (10, 100, 1.0, 1.0, False, False),  # entries still coming: keep gathering
        (10, 100, 5.0, 5.0, False, True),  # nothing new for the window: submit
        (100, 100, 0.0, 0.0, False, True),  # a full batch goes at once
        (100, 100, 99.0, 99.0, True, False),  # held: the provider's queue is full
        (10, 100, 1.0, 59.0, False, False),  # a trickle: gathered a while yet
        (10, 100, 1.0, 60.0, False, True),  # a trickle: the oldest waited long enough
    ],
)
def test_a_batch_is_submitted_when_full_once_the_lane_is_quiet_or_after_long_enough(
    gathered: int, full: int, quiet: float, oldest: float, held: bool, expected: bool
) -> None:
    assert submit_now(gathered, full, quiet, oldest, 5.0, held) is expected
