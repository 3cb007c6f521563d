"""The fleet's first call: one at a time, fleet-wide, while the fleet knows nothing.

The pure decisions (the gate's reply read as a turn, when an answer is recorded) are
table-tested; the gate runs on the suite's real redis-server through the token budgets
of several "workers" (one client each) sharing one analyzer.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest

from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform_tests.harness.waits import wait_until
from workers.analyzer.limits.first_call import GATE_RETRY_S, MIN_RETRY_S, Turn, record_due, turn_of
from workers.analyzer.limits.fleet_limits import FleetBusy
from workers.analyzer.limits.token_budget import TokenBudget, budget_key

# --- pure decisions -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "left_ms", "turn"),
    [
        (1, 0, Turn(go=True)),  # the fleet knows: go, paced by what it knows
        (2, 0, Turn(go=True, probe=True)),  # the gate is this call's
        (0, 30_000, Turn(go=False, retry_s=GATE_RETRY_S)),  # another's: look again soon
        (0, 40, Turn(go=False, retry_s=0.04)),  # it lapses sooner: look then
        (0, 2, Turn(go=False, retry_s=MIN_RETRY_S)),  # never a spin
        (0, -2, Turn(go=False, retry_s=MIN_RETRY_S)),  # gone between two reads
    ],
)
def test_the_gates_reply_is_a_turn(code: int, left_ms: int, turn: Turn) -> None:
    assert turn_of(code, left_ms) == turn


@pytest.mark.parametrize(
    ("holds_gate", "now", "next_record", "due"),
    [
        (True, 0.0, 5.0, True),  # the probe's answer opens the gate: always written
        (False, 4.9, 5.0, False),  # recorded within the refresh period: not again
        (False, 5.0, 5.0, True),
    ],
)
def test_an_answer_is_recorded_by_the_probe_and_otherwise_once_per_period(
    holds_gate: bool, now: float, next_record: float, due: bool
) -> None:
    assert record_due(holds_gate, now, next_record) is due


# --- on a real Redis ----------------------------------------------------------------

OPENAI = {
    "x-ratelimit-limit-tokens": "6000",
    "x-ratelimit-remaining-tokens": "0",
    "x-ratelimit-reset-tokens": "60s",
}


class Clock:
    """A monotonic clock the test moves (the workers' "known" is trusted for a second)."""

    def __init__(self) -> None:
        self.now = 1_000.0

    def __call__(self) -> float:
        return self.now


def worker(clients: Callable[[], RedisClient], clock: Clock, hold_s: float = 30.0) -> TokenBudget:
    made = TokenBudget("svc", first_call_s=hold_s, clock=clock)
    made.bind(clients())
    return made


def test_one_call_goes_while_the_fleet_knows_nothing_and_its_answer_paces_the_rest(
    clients: Callable[[], RedisClient], redis_client: RedisClient
) -> None:
    clock = Clock()
    first, second, third = (worker(clients, clock) for _ in range(3))
    first.reserve(100)  # nothing known: this call is the fleet's probe
    for budget in (second, third):  # every other worker's call waits its turn
        with pytest.raises(FleetBusy) as waits:
            budget.reserve(100)
        assert waits.value.retry_after_s == GATE_RETRY_S
    first.reserve(100)  # the probe's own thread, again (a retried call): still its gate
    refused: list[BaseException] = []
    other_thread = threading.Thread(target=lambda: catch(first, refused))
    other_thread.start()
    other_thread.join(timeout=5)
    assert [type(e) for e in refused] == [FleetBusy]  # another thread of the same worker
    first.learn(OPENAI)  # its answer: 6,000 a minute, none left
    assert redis_client.exists(budget_key("svc", "gate")) == 0
    with pytest.raises(FleetBusy) as paced:  # the gate is open; the learnt bucket paces
        second.reserve(300)
    assert paced.value.retry_after_s == pytest.approx(3.0, abs=0.2)  # 300 at 100 a second


def test_an_answer_announcing_nothing_opens_the_gate_until_its_record_lapses(
    clients: Callable[[], RedisClient], redis_client: RedisClient
) -> None:
    clock = Clock()
    first, second = worker(clients, clock), worker(clients, clock)
    first.reserve(100)
    first.learn({})  # answered, announcing nothing: a configured limit, a local server
    for _ in range(3):
        second.reserve(100)  # full speed: no gate, no pace
        first.reserve(100)
    redis_client.delete(budget_key("svc", "silent"))  # the record's TTL lapsed
    clock.now += 1.0  # ... and the workers' memory of it
    second.reserve(100)  # gated again: one call
    with pytest.raises(FleetBusy):
        first.reserve(100)
    assert 0 < int(redis_client.pttl(budget_key("svc", "gate"))) <= 30_000


def test_a_call_with_no_answer_gives_the_gate_to_the_next_and_a_lost_probe_lapses(
    clients: Callable[[], RedisClient], redis_client: RedisClient
) -> None:
    clock = Clock()
    first, second = worker(clients, clock), worker(clients, clock)
    first.reserve(100)
    first.first_call.release()  # refused, timed out: nothing learnt
    second.reserve(100)  # the next call probes
    with pytest.raises(FleetBusy):
        first.reserve(100)
    first.first_call.release()  # not its gate: nothing given back
    assert redis_client.exists(budget_key("svc", "gate")) == 1
    # a probe whose worker died holds the gate no longer than its hold (its timeout)
    third, fourth = worker(clients, clock, 0.2), worker(clients, clock, 0.2)
    redis_client.delete(budget_key("svc", "gate"))
    third.reserve(100)
    wait_until(lambda: try_reserve(fourth), timeout_s=5, what="the lost probe's gate lapsing")


def catch(budget: TokenBudget, caught: list[BaseException]) -> None:
    try:
        budget.reserve(100)
    except FleetBusy as exc:
        caught.append(exc)


def try_reserve(budget: TokenBudget) -> bool:
    try:
        budget.reserve(100)
    except FleetBusy:
        return False
    return True


def test_a_budget_with_no_gate_or_no_redis_never_waits_for_one(
    clients: Callable[[], RedisClient],
) -> None:
    ungated = TokenBudget("svc")  # no first_call_s: as before the gate
    ungated.bind(clients())
    unbound = TokenBudget("svc", first_call_s=30.0)  # no Redis: nothing to share
    for budget in (ungated, ungated, unbound, unbound):
        budget.reserve(100)
