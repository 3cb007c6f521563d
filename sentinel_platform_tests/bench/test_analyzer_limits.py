"""The goal arithmetic of :mod:`bench.analyzer_limits` and :mod:`bench.cells` (pure parts;
no server, no worker).

Importing the modules also checks that they import the harness and the platform the way
``python -m bench analyzer_limits`` does.
"""

from __future__ import annotations

import math

import pytest

from bench.analyzer_limits import (
    CAPACITY,
    COPIES_KEYS,
    LATENCY_S,
    goal_sides,
    goals,
    median_ratio,
    rate_tolerance,
    spread,
    worst_window_error,
)
from bench.cells import Cell, transactions, window_counts
from bench.timing import verdict


@pytest.mark.parametrize(
    ("value", "goal", "at_most", "expected"),
    [
        (0.8, 0.8, False, "PASS"),
        (0.79, 0.8, False, "MISS"),
        (60.0, 60.0, True, "PASS"),
        (60.1, 60.0, True, "MISS"),
        (0, 0, True, "PASS"),
        (1, 0, True, "MISS"),
        (None, 0.8, False, "MISS"),  # not measured is never a pass
        (math.nan, 0.8, False, "MISS"),
    ],
)
def test_verdict(value: float | None, goal: float, at_most: bool, expected: str) -> None:
    assert verdict(value, goal, at_most=at_most) == expected


@pytest.mark.parametrize(
    ("values", "expected"),
    [([10, 20, 15], 2.0), ([5, 5, 5], 1.0), ([0, 3], math.inf), ([0, 0], 1.0), ([], None)],
)
def test_spread_is_largest_over_smallest(values: list[float], expected: float | None) -> None:
    assert spread(values) == expected


def test_windows_count_calls_per_full_second_from_the_first_call_to_the_last() -> None:
    # 100 calls a second from t = 10.0, sampled every 10 ms, the last call at 13.5 s.
    samples = [(10.0 + i / 100, min(i, 350)) for i in range(0, 450)]
    windows = window_counts(samples, start=10.0)
    assert windows == [100, 100, 100]  # 13.0 .. 14.0 is partial (the calls ended): left out


def test_windows_of_a_counter_that_never_moved_or_was_never_sampled() -> None:
    assert window_counts([], start=0.0) == []
    assert window_counts([(0.0, 0), (5.0, 0)], start=0.0) == []


def test_rate_goal_skips_the_first_window_and_allows_max_of_5_percent_and_one_call() -> None:
    assert rate_tolerance(100) == 5.0
    assert rate_tolerance(10) == 1.0
    assert worst_window_error([40, 104, 97], 100) == 4  # the first window (ramp-up) is free
    assert worst_window_error([100], 100) is None  # nothing after the first: not measured


def test_median_ratio() -> None:
    assert median_ratio([9, 10, 11], [10, 20, 10]) == 1.0
    assert median_ratio([], [1]) is None


def test_copies_are_adjacent_and_share_their_id() -> None:
    ids = [message["data"].split('"id":"')[1].split('"')[0] for message in transactions(2, 3)]
    assert ids == ["t0", "t0", "t0", "t1", "t1", "t1"]


def _cell(key: str, **figures: object) -> Cell:
    cell = Cell(key, 1, "auto", 100)
    for name, value in figures.items():
        setattr(cell, name, value)
    return cell


def test_goals_on_an_auto_default_judge_auto_and_the_previous_default() -> None:
    ideal = CAPACITY / LATENCY_S
    cells = {
        "reject auto": _cell("reject auto", ai=int(0.75 * ideal * 10), seconds=10.0),
        "shared auto": _cell("shared auto", ai=800, seconds=10.0, worker_ai=[100, 300, 400]),
        "copies auto": _cell("copies auto", calls_per_key={f"t{i}": 1 for i in range(24)}),
        "copies C=1": _cell("copies C=1", calls_per_key={f"t{i}": 3 for i in range(24)}),
    }
    assert goal_sides("auto") == [
        ("auto", "auto (the default)"),
        ("C=1", "C=1 (the previous default)"),
    ]
    found = {g.text: g for g in goals(cells, {"reject", "shared", "copies"}, "auto")}
    assert found["K=8 429+Retry-After, auto (the default): AI verdicts/s >= 0.7x K/L"].verdict == (
        "PASS"
    )
    assert found["3 workers, K=8 429, auto (the default): each within 2x"].value == 4.0
    assert found["3 workers, K=8 429, auto (the default): each within 2x"].verdict == "MISS"
    assert found[f"copies, 3 workers, auto: analyzer calls / {COPIES_KEYS} = 1"].verdict == "PASS"
    assert found[f"copies, 3 workers, C=1: analyzer calls / {COPIES_KEYS} = 1"].value == 3.0
    assert found[f"copies, 3 workers, C=1: analyzer calls / {COPIES_KEYS} = 1"].verdict == "MISS"


def test_goals_of_a_scenario_whose_cells_are_missing_are_misses() -> None:
    found = goals({}, {"queue", "server"}, "1")
    assert [g.text.split(":")[0] for g in found if "queueing" in g.text] == [
        "K=8 queueing, default C=1",
        "K=8 queueing, default C=1",
        "K=8 queueing, auto",
        "K=8 queueing, auto",
    ]
    assert found and all(g.verdict == "MISS" for g in found)
