"""When the re-screen may call: a table of the live consumer's states and the analyzer's."""

from __future__ import annotations

import pytest

from workers.analyzer.breaker import CircuitBreaker
from workers.analyzer.limits.fleet_limits import FleetLimits
from workers.rescreening.gate import analyzer_ready, rescreen_room


@pytest.mark.parametrize(
    ("live_limit", "live_held", "caught_up", "ready", "room"),
    [
        (4, 0, True, True, 4),  # the live stream idle: the whole limit
        (4, 3, True, True, 1),  # what the live calls leave
        (4, 4, True, True, 0),  # the live limit in use
        (4, 6, True, True, 0),  # more in hand than the limit (read ahead): none, not less
        (4, 0, False, True, 0),  # undelivered live messages (or no read yet): none
        (4, 0, True, False, 0),  # the analyzer held or its breaker open: none
        (1, 0, True, True, 1),
    ],
)
def test_the_re_screen_takes_only_what_caught_up_live_traffic_leaves(
    live_limit: int, live_held: int, caught_up: bool, ready: bool, room: int
) -> None:
    assert rescreen_room(live_limit, live_held, caught_up, ready) == room


def test_an_analyzer_is_not_ready_while_its_breaker_is_open_or_the_fleet_is_held() -> None:
    class Analyzer:
        def __init__(self) -> None:
            self.breaker = CircuitBreaker(1, 60.0)
            self.limits = FleetLimits("a")

    analyzer = Analyzer()
    assert analyzer_ready(analyzer)
    analyzer.limits.hold(30.0, "retry_after: 429")
    assert not analyzer_ready(analyzer)
    other = Analyzer()
    ticket = other.breaker.admit().ticket
    assert ticket is not None
    other.breaker.failed(ticket, "refused")
    assert not analyzer_ready(other)
    assert analyzer_ready(object())  # no breaker, no limits: nothing holds it


def test_a_lane_is_ready_when_an_analyzer_that_may_decide_through_it_is() -> None:
    class Held:
        def __init__(self) -> None:
            self.limits = FleetLimits("held")
            self.limits.hold(30.0, "retry_after: 429")

    class Lane:
        def __init__(self, *deciders: object) -> None:
            self._deciders = deciders

        def deciders(self) -> tuple[object, ...]:
            return self._deciders

    assert not analyzer_ready(Lane(Held()))  # a shadow over a held live analyzer
    assert analyzer_ready(Lane(Held(), object()))  # a fallback that may still be asked
    assert not analyzer_ready(Lane(Lane(Held())))
