"""What the lag gate remembers about one stream between two ticks, and its cursor format.

The gate's state lives in the sensor's cursor, shown on the sensor's page and kept across
Dagster restarts and upgrades, so reading it back must never fail a tick: a cursor of an
earlier format is migrated, and anything else unreadable starts fresh (the pause flag's
adoption, in :func:`~sentinel_platform.domains.operations.lag_gate_policy.adopt_flag`,
makes a lost cursor safe).

Cursor format (one JSON object per stream, :meth:`GateState.to_json`)::

    {"format": 2, "zone": "nominal", "paused": false, "episode": "1767960000000",
     "held": ["2026-01-10"], "relaunched": ["2026-01-09"], "last_due": "2026-01-10",
     "observed": "<digest of the figures last recorded>", "observed_at": 1767960000.0}

``observed`` is a short digest, not the figures: the cursor is shown on the sensor's page,
and the figures themselves are in the observation it recorded.

``relaunched`` names the partitions launched when ``episode`` ended. A cursor without
``format`` (the first version, same fields but ``relaunched``) is migrated.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, TypeVar, cast, get_args

from sentinel_platform.streams.backlog.lag import Zone

CURSOR_FORMAT = 2
ZONES: frozenset[str] = frozenset(get_args(Zone))
T = TypeVar("T")


@dataclass(frozen=True)
class GateState:
    """What the cursor remembers about one stream between two ticks."""

    zone: Zone | None = None
    paused: bool = False
    #: The current or last pause episode (its start in ms, as text: it names run keys).
    episode: str | None = None
    #: Partitions held back during the current episode, in the order they were held.
    held: tuple[str, ...] = ()
    #: Partitions launched when ``episode`` ended.
    relaunched: tuple[str, ...] = ()
    #: The newest due partition already seen, so each comes due once.
    last_due: str | None = None
    #: The figures last recorded and when (seconds), to record only on change.
    observed: str | None = None
    observed_at: float | None = None

    @classmethod
    def from_json(cls, raw: object) -> GateState:
        """The state stored by :meth:`to_json` or by the first cursor format; a value of
        the wrong shape gives a fresh state rather than a sensor failing every tick."""
        if not isinstance(raw, Mapping):
            return cls()
        try:
            return cls(
                zone=_zone_or_none(raw.get("zone")),
                paused=_typed(raw.get("paused", False), bool),
                episode=_optional(raw.get("episode"), str),
                held=_partitions(raw.get("held", [])),
                relaunched=_partitions(raw.get("relaunched", [])),
                last_due=_optional(raw.get("last_due"), str),
                observed=_optional(raw.get("observed"), str),
                observed_at=_optional_number(raw.get("observed_at")),
            )
        except TypeError:
            return cls()

    def to_json(self) -> dict[str, Any]:
        return {
            "format": CURSOR_FORMAT,
            "zone": self.zone,
            "paused": self.paused,
            "episode": self.episode,
            "held": list(self.held),
            "relaunched": list(self.relaunched),
            "last_due": self.last_due,
            "observed": self.observed,
            "observed_at": self.observed_at,
        }


def _zone_or_none(value: object) -> Zone | None:
    if value is None:
        return None
    if value not in ZONES:
        raise TypeError(f"unknown zone {value!r}")
    return cast("Zone", value)  # one of ZONES, checked above


def _typed(value: object, kind: type[T]) -> T:
    if not isinstance(value, kind):
        raise TypeError(f"expected {kind.__name__}, got {type(value).__name__}")
    return value


def _optional(value: object, kind: type[T]) -> T | None:
    return None if value is None else _typed(value, kind)


def _optional_number(value: object) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError("expected a number")
    return float(value)


def _partitions(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise TypeError("expected a list of partition keys")
    return tuple(value)
