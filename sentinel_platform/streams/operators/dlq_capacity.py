"""How full the DLQ is, against the cap past which its oldest entries are trimmed.

Workers add dead letters with ``XADD ... MAXLEN ~ SENTINEL_DLQ_MAXLEN``: once a DLQ stream
holds more than the cap, Redis drops its oldest entries, and a dead letter in the DLQ is
the only copy of its message. The trim is approximate: Redis removes whole internal nodes
(``stream-node-max-entries``, 100 by default) and never goes below the cap, so nothing is
trimmed before the length passes the cap, and the length may stand a little above it.
The DLQ sensor therefore warns at :data:`FILL_WARN` and errors at :data:`FILL_ERROR` of
the cap, well before anything is trimmed (a burst larger than the remaining room between
two sensor ticks can still outrun the alerts).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

FillLevel = Literal["ok", "warning", "error"]

#: Fraction of SENTINEL_DLQ_MAXLEN at which the DLQ sensor warns.
FILL_WARN = 0.80
#: Fraction of SENTINEL_DLQ_MAXLEN at which it raises an error.
FILL_ERROR = 0.95
_RANK: dict[str, int] = {"ok": 0, "warning": 1, "error": 2}


def fill_level(entries: int, cap: int) -> FillLevel:
    """``ok``, ``warning`` (at 80% of the cap) or ``error`` (at 95%)."""
    if entries >= FILL_ERROR * cap:
        return "error"
    if entries >= FILL_WARN * cap:
        return "warning"
    return "ok"


def fullest(lengths: Mapping[str, int]) -> tuple[str, int] | None:
    """The DLQ stream holding the most entries (each stream has its own cap)."""
    return max(lengths.items(), key=lambda item: item[1]) if lengths else None


def crossed(previous: str | None, level: FillLevel) -> bool:
    """Whether ``level`` is a crossing upward from ``previous`` (unknown counts as ``ok``)."""
    return _RANK[level] > _RANK.get(previous or "ok", 0)


def percent(entries: int, cap: int) -> int:
    """Fill in whole percent, rounded down (80 of 100 is 80%, 799 of 1000 is 79%)."""
    return entries * 100 // cap
