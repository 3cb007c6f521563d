"""Which of a day's provisional verdicts a launch queues: tables of result streams."""

from __future__ import annotations

import pytest

from sentinel_platform.domains.rescreening.plan import (
    Candidate,
    Plan,
    entry_day,
    plan,
    without_waiting,
)

DAY = "2026-11-26"
PROVISIONAL = {"provisional": "true", "fallback_cause": "down", "day": DAY}


def _results(*rows: tuple[str, dict[str, str]]) -> list[tuple[str, dict[str, str]]]:
    return list(rows)


@pytest.mark.parametrize(
    ("entry_id", "fields", "expected"),
    [
        ("1795651200000-0", {"day": "2026-11-20"}, "2026-11-20"),  # the data's day
        ("1795651200000-0", {}, "2026-11-26"),  # none: the entry id's UTC date
        ("1795737599999-3", {"day": ""}, "2026-11-26"),  # empty counts as none
    ],
)
def test_entry_day(entry_id: str, fields: dict[str, str], expected: str) -> None:
    assert entry_day(entry_id, fields) == expected


CASES = [
    # (results, queued, expected queue, superseded, waiting)
    (  # one provisional verdict: queued
        _results(("1-0", {**PROVISIONAL, "source_message_id": "9-0"})),
        [],
        [Candidate("1-0", "9-0", "down", DAY)],
        0,
        0,
    ),
    (  # superseded by a re-screen: not queued again
        _results(
            ("1-0", {**PROVISIONAL, "source_message_id": "9-0"}),
            ("2-0", {"driver_used": "analyzer", "rescreen_of": "1-0", "day": DAY}),
        ),
        [],
        [],
        1,
        0,
    ),
    (  # already waiting in the queue: not queued twice
        _results(("1-0", {**PROVISIONAL, "source_message_id": "9-0"})),
        ["1-0"],
        [],
        0,
        1,
    ),
    (  # superseded and still in the queue (acknowledged, not trimmed yet): superseded
        _results(
            ("1-0", {**PROVISIONAL, "source_message_id": "9-0"}),
            ("2-0", {"driver_used": "analyzer", "rescreen_of": "1-0", "day": DAY}),
        ),
        ["1-0"],
        [],
        1,
        0,
    ),
    (  # another day's, a final fallback, a model verdict: none of them
        _results(
            ("1-0", {**PROVISIONAL, "day": "2026-11-25", "source_message_id": "9-0"}),
            ("2-0", {"fallback_cause": "refused", "day": DAY, "source_message_id": "9-1"}),
            ("3-0", {"driver_used": "analyzer", "day": DAY, "source_message_id": "9-2"}),
        ),
        [],
        [],
        0,
        0,
    ),
    (  # no day field: the entry id's date decides (1795651200000 is 2026-11-26 00:00 UTC)
        _results(
            ("1795651200000-0", {"provisional": "true", "source_message_id": "9-0"}),
        ),
        [],
        [Candidate("1795651200000-0", "9-0", "", DAY)],
        0,
        0,
    ),
]


@pytest.mark.parametrize(("results", "queued", "queue", "superseded", "waiting"), CASES)
def test_plan(
    results: list[tuple[str, dict[str, str]]],
    queued: list[str],
    queue: list[Candidate],
    superseded: int,
    waiting: int,
) -> None:
    decided = without_waiting(plan(iter(results), DAY), queued)
    assert decided == Plan(tuple(queue), superseded, waiting)
