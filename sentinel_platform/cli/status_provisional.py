"""``sentinel status``: how many verdicts are provisional, and how old the oldest is.

A provisional verdict is a rules fallback made only because the analyzer could not be
asked; it waits in its stream's re-screen queue for the model
(:mod:`~sentinel_platform.streams.backlog.provisional`). The status reads a stream's
queues with
:func:`~sentinel_platform.streams.backlog.provisional_shards.read_shards_provisional`,
the read the exporter shares: a sharded stream's queues summed, the oldest age the
oldest of all. A queue whose oldest entry has
waited longer than :data:`WARN_AFTER_S` is a warning: the model has not come back, or
re-screening does not keep up, and until it does those messages keep the rules' verdict.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from sentinel_platform.streams.backlog.provisional_shards import read_shards_provisional
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys

#: A provisional verdict older than this makes the status a warning (an outage of a few
#: minutes is re-screened soon after; one that still waits after this is not passing).
WARN_AFTER_S = 600.0


def read(client: RedisClient, shards: Sequence[StreamKeys]) -> dict[str, Any]:
    """The provisional backlog of a stream whose shards' keys are ``shards``, as the
    status document holds it."""
    return read_shards_provisional(client, shards).as_dict()


def age_text(seconds: float) -> str:
    """``45s``, ``4m 10s``, ``2h 05m``."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m {whole % 60:02d}s"
    return f"{whole // 3600}h {whole % 3600 // 60:02d}m"


def line(backlog: Mapping[str, Any] | None) -> str | None:
    """``  provisional: 120 verdicts wait for the model, oldest 4m 10s``; None: not read."""
    if backlog is None:
        return None
    waiting = backlog["waiting"]
    if not waiting:
        return "  provisional: none"
    age = backlog["oldest_age_s"]
    oldest = "" if age is None else f", oldest {age_text(age)}"
    noun = "verdict waits" if waiting == 1 else "verdicts wait"
    return f"  provisional: {waiting} {noun} for the model{oldest}"


def warnings(streams: Sequence[Mapping[str, Any]], bound_s: float = WARN_AFTER_S) -> list[str]:
    """One sentence per stream whose oldest provisional verdict is older than ``bound_s``."""
    found = []
    for s in streams:
        backlog = s.get("provisional") or {}
        age = backlog.get("oldest_age_s")
        if backlog.get("waiting") and age is not None and age > bound_s:
            found.append(
                f"{s['stream']}: {backlog['waiting']} provisional verdicts wait for the "
                f"model, the oldest {age_text(age)} (over {age_text(bound_s)}): they keep "
                "the rules' verdict until the analyzer answers again and re-screens them"
            )
    return found
