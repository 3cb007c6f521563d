"""Whether a worker's adaptive limit is still climbing (``Climb``), from tables of the
steady limits it published over time: a rise keeps the claim, a small dip does not end
it, a cut below a share of the climb's high does, and so does a limit that stopped
rising for the claim's memory of work or reached its maximum. Idle time (``IDLE``: the
stream had nothing to do) is not counted against the memory."""

from __future__ import annotations

import pytest

from sentinel_platform.streams.consumer.settling.lag_and_holding import Climb

MEMORY_S = 10.0
MAXIMUM = 64
IDLE = True  # a step's third field: the stream had nothing to do at that step


@pytest.mark.parametrize(
    ("steps", "climbing"),
    [
        pytest.param([(0, 3)], True, id="auto starts low: a start is a rise"),
        pytest.param([(0, 3), (1, 5), (2, 8)], True, id="rising"),
        pytest.param([(0, 3), (1, 8), (2, 7)], True, id="a noisy dip is not a cut"),
        pytest.param([(0, 3), (1, 8), (2, 7), (3, 6)], True, id="dips above three quarters"),
        pytest.param([(0, 3), (1, 8), (2, 5)], False, id="a cut below three quarters"),
        pytest.param([(0, 3), (1, 8), (2, 7), (3, 5)], False, id="dips that add up to a cut"),
        pytest.param([(0, 3), (1, 8), (12, 8)], False, id="no rise for the memory"),
        pytest.param([(0, 3), (1, 8), (8, 7), (12, 7)], False, id="a dip renews nothing"),
        pytest.param([(0, 3), (1, MAXIMUM)], False, id="at its maximum"),
        pytest.param([(0, 3), (1, 8), (2, 4), (3, 5)], True, id="a rise after a cut climbs"),
        pytest.param(
            [(0, 3), (1, 8), (2, 4), (3, 5), (4, 3)], False, id="the new climb's high counts"
        ),
        pytest.param([(0, 3, IDLE), (120, 3, IDLE), (121, 3)], True, id="idle from its start"),
        pytest.param(
            [(0, 3, IDLE), (120, 3, IDLE), (131, 3)], False, id="then no rise for the memory"
        ),
        pytest.param([(0, 3), (1, 8), (60, 8, IDLE), (61, 8)], True, id="a rested climb resumes"),
        pytest.param([(0, 3), (1, 8), (2, 4), (60, 4, IDLE), (61, 4)], False, id="a cut stays"),
        pytest.param([(0, 3, IDLE), (1, MAXIMUM, IDLE)], False, id="idle at its maximum"),
    ],
)
def test_climb(steps: list[tuple[float, int] | tuple[float, int, bool]], climbing: bool) -> None:
    now = [0.0]
    climb = Climb(MEMORY_S, clock=lambda: now[0])
    said = None
    for at, steady, *idle in steps:
        now[0] = at
        said = climb.observe_steady(steady, MAXIMUM, bool(idle))
    assert said is climbing


def test_a_fixed_limit_never_climbs() -> None:
    assert Climb(MEMORY_S).observe(8) is False
