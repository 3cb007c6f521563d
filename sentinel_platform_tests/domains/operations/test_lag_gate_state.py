"""The lag gate's cursor: any earlier shape loads safely, the current one round-trips."""

from __future__ import annotations

import pytest

from sentinel_platform.domains.operations.lag_gate_state import GateState
from sentinel_platform_tests.harness.gate_states import EPISODE, paused

FIRST_FORMAT = {
    "zone": "backpressure",
    "paused": True,
    "episode": EPISODE,
    "held": ["2026-01-10"],
    "last_due": "2026-01-10",
    "observed": "{}",
    "observed_at": 990.5,
}


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        pytest.param(
            FIRST_FORMAT,
            GateState(
                zone="backpressure",
                paused=True,
                episode=EPISODE,
                held=("2026-01-10",),
                relaunched=(),
                last_due="2026-01-10",
                observed="{}",
                observed_at=990.5,
            ),
            id="first-format-cursor-is-migrated",
        ),
        pytest.param(None, GateState(), id="no-cursor-starts-fresh"),
        pytest.param("garbage", GateState(), id="non-object-starts-fresh"),
        pytest.param({**FIRST_FORMAT, "held": "2026-01-10"}, GateState(), id="held-not-a-list"),
        pytest.param({**FIRST_FORMAT, "zone": "panic"}, GateState(), id="unknown-zone"),
        pytest.param({**FIRST_FORMAT, "paused": "yes"}, GateState(), id="paused-not-a-bool"),
        pytest.param({**FIRST_FORMAT, "observed_at": "soon"}, GateState(), id="time-not-a-number"),
    ],
)
def test_cursor_of_any_earlier_shape_loads_safely(raw: object, expected: GateState) -> None:
    assert GateState.from_json(raw) == expected


def test_cursor_round_trips() -> None:
    state = paused(held=("2026-01-10",), relaunched=("2026-01-08",))
    assert GateState.from_json(state.to_json()) == state
    assert state.to_json()["format"] == 2
