"""The lag gate's states as its tests start from them: one episode, paused mid-way, shared
by the tests of the gate's rules and of its cursor."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from sentinel_platform.domains.operations.lag_gate_state import GateState

EPISODE = "1767950000000"


def paused(**changes: Any) -> GateState:
    """Mid-episode, in backpressure, with those figures already recorded."""
    base = GateState(
        zone="backpressure",
        paused=True,
        episode=EPISODE,
        last_due="2026-01-09",
        observed="backpressure:12",
        observed_at=990.0,
    )
    return replace(base, **changes)
