"""The pure parts of :mod:`bench.quota_exhausted`: calls per worker after the fleet's first
``insufficient_quota`` answer, after its own and after it knew, the messages' accounting,
the goals' verdicts and a log line's time (no server, no worker).

Importing the module also checks that it imports the harness and the platform the way
``python -m bench quota_exhausted`` does.
"""

from __future__ import annotations

import calendar
from typing import Any

import pytest

from bench.quota_exhausted import (
    account,
    calls_after,
    calls_after_known,
    calls_after_own,
    judge,
    log_time,
)


def call(worker: int, at: float, status: int | None = 200, answered: float = 0.0) -> dict:
    entry: dict[str, Any] = {"headers": {"authorization": f"Bearer sk-bench-worker-{worker}"}}
    entry["at"] = at
    if status is not None:  # None: not answered yet
        entry.update(status=status, answered_at=answered or at + 0.5)
    return entry


@pytest.mark.parametrize(
    ("calls", "first", "after"),
    [
        ([], None, {}),
        ([call(0, 1.0), call(1, 1.1)], None, {"worker-0": 0, "worker-1": 0}),
        # a call under way when the first refusal is answered is not after it
        ([call(0, 1.0), call(1, 1.2, 429, 1.21), call(0, 1.205)], 1.21,
         {"worker-0": 0, "worker-1": 0}),
        # the earliest answered refusal counts, not the first recorded
        ([call(0, 1.0, 429, 1.5), call(1, 1.2, 429, 1.3), call(0, 1.4, 429), call(0, 1.45, None)],
         1.3, {"worker-0": 2, "worker-1": 0}),
    ],
)  # fmt: skip
def test_calls_after_the_first_refusal_per_worker(
    calls: list[dict], first: float | None, after: dict[str, int]
) -> None:
    assert calls_after(calls) == (first, after)


#: worker-0 refused at 1.3 (answered), worker-1 first at 1.5; worker-2 never refused.
WAVES = [call(0, 1.0), call(0, 1.3, 429, 1.3), call(0, 1.31, 429), call(0, 1.32, 429),
         call(1, 1.2), call(1, 1.5, 429, 1.5), call(1, 1.6, 429), call(2, 1.4)]  # fmt: skip


def test_calls_after_its_own_first_refusal_count_from_each_workers_own() -> None:
    assert calls_after(WAVES)[1] == {"worker-0": 2, "worker-1": 2, "worker-2": 1}
    assert calls_after_own(WAVES) == {"worker-0": 2, "worker-1": 1, "worker-2": 0}


@pytest.mark.parametrize(
    ("known", "after"),
    [
        ({}, {"worker-0": 0, "worker-1": 0, "worker-2": 0}),  # no ERROR line: nothing known
        ({"worker-0": 1.315, "worker-1": 1.55}, {"worker-0": 1, "worker-1": 1, "worker-2": 0}),
        ({"worker-0": 1.305, "worker-1": None}, {"worker-0": 2, "worker-1": 0, "worker-2": 0}),
    ],
)
def test_calls_after_the_worker_knew(known: dict, after: dict[str, int]) -> None:
    assert calls_after_known(WAVES, known) == after


def verdict(txn: str, driver: str = "analyzer") -> dict[str, str]:
    return {"txn_id": txn, "driver_used": driver}


@pytest.mark.parametrize(
    ("verdicts", "waiting", "when_down", "dead", "expected"),
    [
        ([verdict("a"), verdict("b", "fallback"), verdict("c", "fallback")], set(), "rules", 0,
         {"lost": 0, "twice": 0, "off_policy": 0, "ai": 1, "fallbacks": 2, "waiting": 0}),
        ([verdict("a")], {"b", "c"}, "wait", 0,
         {"lost": 0, "twice": 0, "off_policy": 0, "ai": 1, "fallbacks": 0, "waiting": 2}),
        # c nowhere: lost; a twice; a fallback under wait and a dead letter: off the policy
        ([verdict("a"), verdict("a"), verdict("b", "fallback")], set(), "wait", 1,
         {"lost": 1, "twice": 1, "off_policy": 2, "ai": 2, "fallbacks": 1, "waiting": 0}),
        # decided and still pending (acknowledged after the stop): not waiting, not lost
        ([verdict("a"), verdict("b")], {"b", "c"}, "rules", 0,
         {"lost": 0, "twice": 0, "off_policy": 0, "ai": 2, "fallbacks": 0, "waiting": 1}),
    ],
)  # fmt: skip
def test_account_of_the_messages(
    verdicts: list[dict[str, str]], waiting: set[str], when_down: str, dead: int, expected: dict
) -> None:
    assert account(["a", "b", "c"], verdicts, waiting, when_down, dead) == expected


GOOD = {"calls_after_known": {"worker-0": 1, "worker-1": 0}, "error_lines": [1, 0], "gauge_s": 0.2,
        "log_s": 0.05, "lost": 0, "twice": 0, "off_policy": 0}  # fmt: skip


@pytest.mark.parametrize(
    ("change", "missed"),
    [
        ({}, []),
        ({"calls_after_known": {"worker-0": 2, "worker-1": 0}}, ["calls per worker"]),
        ({"calls_after_known": {}}, ["calls per worker"]),  # no call at all: not measured
        # the fleet's count is printed, not judged
        ({"calls_after": {"worker-0": 8}, "calls_after_own": {"worker-0": 7}}, []),
        ({"gauge_s": 5.01}, ["exhausted gauge"]),
        ({"gauge_s": None}, ["exhausted gauge"]),  # never seen
        ({"log_s": None, "error_lines": [0, 0]}, ["ERROR line after"]),
        ({"error_lines": [2, 1]}, ["lines per worker"]),
        ({"lost": 1, "twice": 1, "off_policy": 3}, ["lost", "twice", "against"]),
    ],
)
def test_judge_passes_only_what_meets_each_goal(change: dict, missed: list[str]) -> None:
    goals = judge("rules", {**GOOD, **change})
    assert all(g.text.startswith("rules: ") for g in goals)
    failed = [g.text for g in goals if g.verdict == "MISS"]
    assert len(failed) == len(missed), failed
    assert all(any(word in text for text in failed) for word in missed), failed


def test_log_time() -> None:
    assert log_time("2026-11-27T08:50:01.125Z") == calendar.timegm((2026, 11, 27, 8, 50, 1)) + 0.125
