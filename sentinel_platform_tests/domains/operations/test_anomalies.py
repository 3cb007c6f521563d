"""The stall rule of :func:`stalled`, from a table of windows: growth alone is no stall."""

from __future__ import annotations

import pytest

from sentinel_platform.domains.operations.anomalies import slide_windows, stalled

SIZE = 3


@pytest.mark.parametrize(
    ("counts", "oldest", "expected"),
    [
        ([1, 2, 3], ["a", "a", "a"], True),  # grew, and never settled its oldest
        ([1, 1, 3], ["a", "a", "a"], True),  # a flat tick within the growth
        ([1, 2, 3], ["a", "b", "c"], False),  # grew while settling: a limit climbing
        ([1, 2, 3], ["a", "a", "b"], False),  # settled once within the window
        ([3, 3, 3], ["a", "a", "a"], False),  # held, not grown (the idle alert's case)
        ([1, 3, 2], ["a", "a", "a"], False),  # went down once
        ([1, 2], ["a", "a"], False),  # one window short: no verdict
        ([1, 2, 3], ["a", "a"], False),  # ids for less than a window (an older cursor)
        ([1, 2, 3], [], False),
    ],
)
def test_a_consumer_is_stalled_only_if_it_grew_and_its_oldest_never_moved(
    counts: list[int], oldest: list[str], expected: bool
) -> None:
    found = stalled({"c": counts}, {"c": oldest} if oldest else {}, SIZE)
    assert ("c" in found) is expected
    assert found.get("c", counts) == counts  # the verdict carries the counts it judged


def test_windows_keep_the_last_ticks_of_consumers_that_hold_something() -> None:
    windows = slide_windows({"a": [1, 2, 3], "gone": [4]}, {"a": 5, "b": 1, "gone": 0}, SIZE)
    assert windows == {"a": [2, 3, 5], "b": [1]}
    assert slide_windows({"a": ["1-0"]}, {"a": "2-0"}, SIZE) == {"a": ["1-0", "2-0"]}
