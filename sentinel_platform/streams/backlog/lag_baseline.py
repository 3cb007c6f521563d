"""The remembered count of a backlog the server cannot report: when to trust it, how to move it.

While the server's ``lag`` is nil, counting the backlog costs O(backlog) of server time,
and the lag is measured by every worker ten times a second and by every producer batch.
So a count is remembered (:class:`CountBaseline`) with where it was taken: the group's
last-delivered id, the stream's ``entries-added`` and length. A later measurement derives
the backlog from it: plus the entries added since, minus the entries between the
remembered position and the group's current one (:func:`derive_baseline`), and remembers
that in turn. :func:`plan_count` decides between counting, recounting and deriving. Both
are pure, tested from tables of cases; the shell that reads, counts and stores is
:func:`~sentinel_platform.streams.backlog.lag.measure_lag`.

Staleness bound of a derived figure: it is exact unless an entry after the group's
position was removed since the last exact count. The stream's length and
``entries-added`` tell that entries were removed, not where; a head trim that stays below
the group's position (retention's) is recognised from the first entry's id. Other
removals (an ``XDEL`` ahead of the group, a trim past its position) may leave the figure
too high, never too low, by at most the number of entries removed, until the next exact
count, at most :data:`RECOUNT_INTERVAL_S` later. An ``XDEL`` between the group and an older
tombstone is invisible to the server's counters; every count is redone at least every
:data:`REFRESH_S` while the episode lasts, which bounds that case too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Literal

#: A remembered count that may be too high (entries were removed) is redone this long
#: after it was taken, by one process; also the TTL of the claim that picks the process.
RECOUNT_INTERVAL_S = 2.0
#: A remembered count believed exact is still redone this long after it was taken (an
#: XDEL below an older tombstone ahead of the group leaves no trace in the counters).
REFRESH_S = 30.0

CountPlan = Literal["count", "recount", "derive"]
StreamId = tuple[int, int]


def parse_id(value: str) -> StreamId:
    """``"1700000000000-3"`` as ``(1700000000000, 3)``, for ordering stream ids."""
    ms, _, seq = value.partition("-")
    return int(ms), int(seq or 0)


@dataclass(frozen=True)
class StreamSnapshot:
    """The group's position and the stream's counters (``XINFO STREAM``) at one moment.

    ``length`` and ``entries_added`` come from the same reply, so they agree with each
    other; ``first_id`` is None for an empty stream.
    """

    last_delivered_id: str
    length: int
    entries_added: int
    first_id: str | None
    max_deleted_id: str


@dataclass(frozen=True)
class CountBaseline:
    """A remembered backlog: ``backlog`` entries existed after ``last_delivered_id`` when
    the stream had ``length`` entries and ``entries_added`` ever added.

    ``counted_at`` (epoch seconds) is when the exact count it derives from was taken;
    ``excess`` is how many entries were removed since then that may have been part of the
    backlog: the true backlog is between ``backlog - excess`` and ``backlog``.
    """

    backlog: int
    last_delivered_id: str
    entries_added: int
    length: int
    max_deleted_id: str
    counted_at: float
    excess: int = 0

    def to_hash(self) -> dict[str, str]:
        return {
            "backlog": str(self.backlog),
            "last_delivered_id": self.last_delivered_id,
            "entries_added": str(self.entries_added),
            "length": str(self.length),
            "max_deleted_id": self.max_deleted_id,
            "counted_at": repr(self.counted_at),
            "excess": str(self.excess),
        }

    @classmethod
    def from_hash(cls, fields: Mapping[str, str]) -> CountBaseline | None:
        """The baseline stored by :meth:`to_hash`; None when missing or unreadable."""
        try:
            baseline = cls(
                backlog=int(fields["backlog"]),
                last_delivered_id=fields["last_delivered_id"],
                entries_added=int(fields["entries_added"]),
                length=int(fields["length"]),
                max_deleted_id=fields["max_deleted_id"],
                counted_at=float(fields["counted_at"]),
                excess=int(fields["excess"]),
            )
            parse_id(baseline.last_delivered_id), parse_id(baseline.max_deleted_id)
        except (KeyError, ValueError):
            return None
        return baseline


def counted_baseline(snapshot: StreamSnapshot, backlog: int, now: float) -> CountBaseline:
    """The baseline of an exact count taken at ``snapshot``."""
    return CountBaseline(
        backlog=backlog,
        last_delivered_id=snapshot.last_delivered_id,
        entries_added=snapshot.entries_added,
        length=snapshot.length,
        max_deleted_id=snapshot.max_deleted_id,
        counted_at=now,
    )


def _removed(baseline: CountBaseline, snapshot: StreamSnapshot) -> int:
    """Entries removed (deleted or trimmed) between the baseline and the snapshot."""
    return baseline.length + snapshot.entries_added - baseline.entries_added - snapshot.length


def _removals_may_touch_backlog(baseline: CountBaseline, snapshot: StreamSnapshot) -> bool:
    """Whether entries removed since the baseline may have been after its position.

    A trim removes the head, entries older than the first one left: below the position
    when the first entry is at or before it. An XDEL after the position raises the
    stream's max deleted id past the position, unless an older tombstone was already
    there (that case only :data:`REFRESH_S` bounds).
    """
    position = parse_id(baseline.last_delivered_id)
    if snapshot.first_id is not None and parse_id(snapshot.first_id) > position:
        return True  # the head was trimmed (or deleted) past the position
    if snapshot.max_deleted_id == baseline.max_deleted_id:
        return False  # no XDEL above the last tombstone: trims below the position only
    return parse_id(snapshot.max_deleted_id) > position


def plan_count(baseline: CountBaseline | None, snapshot: StreamSnapshot, now: float) -> CountPlan:
    """What a measurement with a nil server ``lag`` does.

    * ``count``: no usable baseline (none, or the group or the stream went back: a group
      reset, a stream re-created): count exactly.
    * ``recount``: the baseline is usable but due: it may be too high (removals) and is
      :data:`RECOUNT_INTERVAL_S` old, or it is :data:`REFRESH_S` old. Count exactly if
      this process wins the claim, else derive.
    * ``derive``: derive the backlog from the baseline (:func:`derive_baseline`).
    """
    if baseline is None:
        return "count"
    removed = _removed(baseline, snapshot)
    if (
        parse_id(snapshot.last_delivered_id) < parse_id(baseline.last_delivered_id)
        or snapshot.entries_added < baseline.entries_added
        or removed < 0
    ):
        return "count"
    uncertain = baseline.excess > 0 or (
        removed > 0 and _removals_may_touch_backlog(baseline, snapshot)
    )
    age = now - baseline.counted_at
    if age >= REFRESH_S or (uncertain and age >= RECOUNT_INTERVAL_S):
        return "recount"
    return "derive"


def derive_baseline(
    baseline: CountBaseline, snapshot: StreamSnapshot, progress: int
) -> CountBaseline:
    """The baseline at ``snapshot``, from ``baseline`` and ``progress``: the entries that
    exist between the baseline's position (excluded) and the snapshot's (included).

    Entries added since are all after any position; entries removed since were either
    below the baseline's position (no effect) or in its backlog (the figure stays high
    by them: ``excess``). Requires :func:`plan_count` to have allowed it.
    """
    removed = _removed(baseline, snapshot)
    excess = baseline.excess
    if removed > 0 and _removals_may_touch_backlog(baseline, snapshot):
        excess += removed
    added = snapshot.entries_added - baseline.entries_added
    backlog = max(0, min(baseline.backlog + added - progress, snapshot.length))
    return replace(
        baseline,
        backlog=backlog,
        last_delivered_id=snapshot.last_delivered_id,
        entries_added=snapshot.entries_added,
        length=snapshot.length,
        max_deleted_id=snapshot.max_deleted_id,
        excess=min(excess, backlog),
    )
