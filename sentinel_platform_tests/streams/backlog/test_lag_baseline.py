"""When a remembered backlog count is trusted, recounted or derived from, from tables of cases."""

from __future__ import annotations

from dataclasses import replace

import pytest

from sentinel_platform.streams.backlog.lag_baseline import (
    RECOUNT_INTERVAL_S,
    REFRESH_S,
    CountBaseline,
    StreamSnapshot,
    derive_baseline,
    plan_count,
)

BASE = CountBaseline(
    backlog=100,
    last_delivered_id="10-0",
    entries_added=200,
    length=150,
    max_deleted_id="50-0",
    counted_at=1000.0,
)


def _snap(
    last: str = "10-0",
    length: int = 150,
    added: int = 200,
    first: str | None = "1-0",
    max_deleted: str = "50-0",
) -> StreamSnapshot:
    return StreamSnapshot(last, length, added, first, max_deleted)


@pytest.mark.parametrize(
    ("baseline", "snapshot", "age_s", "plan"),
    [
        (None, _snap(), 0, "count"),
        (BASE, _snap(), 0, "derive"),
        (BASE, _snap(last="20-0", length=160, added=210), REFRESH_S - 1, "derive"),
        (BASE, _snap(), REFRESH_S, "recount"),
        (BASE, _snap(last="5-0"), 0, "count"),  # the group was moved back
        (BASE, _snap(added=150, length=100), 0, "count"),  # the stream was re-created
        (BASE, _snap(length=151), 0, "count"),  # longer without an add: not this stream
        # A trim below the group (retention's) keeps the figure exact.
        (BASE, _snap(length=130, first="8-0"), RECOUNT_INTERVAL_S, "derive"),
        # A trim past the group's position may have removed some of its backlog.
        (BASE, _snap(length=130, first="12-0"), RECOUNT_INTERVAL_S - 0.1, "derive"),
        (BASE, _snap(length=130, first="12-0"), RECOUNT_INTERVAL_S, "recount"),
        # An XDEL ahead of the group raises the max deleted id past its position.
        (BASE, _snap(length=149, max_deleted="60-0"), RECOUNT_INTERVAL_S, "recount"),
        (BASE, _snap(length=149, max_deleted="60-0"), 1, "derive"),
        # An XDEL behind the group does not touch its backlog.
        (
            replace(BASE, max_deleted_id="5-0"),
            _snap(length=149, max_deleted="9-0"),
            RECOUNT_INTERVAL_S,
            "derive",
        ),
        # A figure already high by some entries is recounted once the interval is over.
        (replace(BASE, excess=3), _snap(), RECOUNT_INTERVAL_S - 0.1, "derive"),
        (replace(BASE, excess=3), _snap(), RECOUNT_INTERVAL_S, "recount"),
    ],
)
def test_a_remembered_count_is_derived_from_until_it_may_be_wrong_and_due(
    baseline: CountBaseline | None, snapshot: StreamSnapshot, age_s: float, plan: str
) -> None:
    assert plan_count(baseline, snapshot, BASE.counted_at + age_s) == plan


@pytest.mark.parametrize(
    ("snapshot", "progress", "backlog", "excess"),
    [
        (_snap(), 0, 100, 0),
        # 10 added, the group read past 30 existing entries.
        (_snap(last="40-0", length=160, added=210), 30, 80, 0),
        # Retention trimmed 20 entries below the group: still exact.
        (_snap(last="40-0", length=140, added=210, first="9-0"), 30, 80, 0),
        # One entry deleted ahead of the group: the figure may be one too high.
        (_snap(last="40-0", length=159, added=210, max_deleted="60-0"), 30, 80, 1),
        # Trimmed past the group: never more than the stream holds.
        (_snap(length=50, first="12-0"), 0, 50, 50),
    ],
)
def test_the_backlog_is_derived_from_entries_added_and_read_since_the_count(
    snapshot: StreamSnapshot, progress: int, backlog: int, excess: int
) -> None:
    derived = derive_baseline(BASE, snapshot, progress)

    assert (derived.backlog, derived.excess) == (backlog, excess)
    assert derived.last_delivered_id == snapshot.last_delivered_id
    assert derived.counted_at == BASE.counted_at  # still as old as its exact count
    assert CountBaseline.from_hash(derived.to_hash()) == derived
