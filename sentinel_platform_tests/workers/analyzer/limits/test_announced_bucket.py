"""An announced budget read as a token bucket refilling at its limit per minute.

OpenAI's rate-limits guide and Anthropic's (the token bucket algorithm: "your capacity is
continuously replenished up to your maximum limit") say a budget's reset is when it is
whole again: a low ``remaining`` is a short wait for the next call, never what is left
spread over the time to the reset. Each row is one announcement and one call's need.
"""

from __future__ import annotations

import pytest

from workers.analyzer.answers.announced_limits import AnnouncedLimits, Budget
from workers.analyzer.limits.announced_bucket import (
    Pace,
    Weights,
    corrections,
    debt_s,
    pace_of,
    paced_budgets,
    turn_in,
    wait_s,
)


@pytest.mark.parametrize(
    ("budget", "need", "debt", "wait"),
    [
        (Budget(60_000, 60_000, 0.0), 500, 0.0, 0.0),  # whole: nothing owed, go now
        (Budget(60_000, 30_000, 30.0), 500, 30.0, 0.0),  # half left: still room
        (Budget(60_000, 100, 59.9), 500, 59.9, 0.4),  # (need - remaining) / rate
        (Budget(60_000, 0, 60.0), 500, 60.0, 0.5),  # spent: one call's refill
        # the answer: 100 of 200,000 left, reset 59.9 s (was 8.2 minutes)
        (Budget(200_000, 100, 59.9), 500, 59.97, 0.12),
        # 1 left (computed to about 14 hours before): one call's refill
        (Budget(200_000, 1, 60.0), 500, 59.9997, 0.1497),
        # a reset sooner than the limit's refill: the call never waits past it
        (Budget(60_000, 0, 0.2), 500, 59.7, 0.2),
        (Budget(60_000, 0, None), 500, 60.0, 0.5),  # no reset announced: the refill
        (Budget(100, 250, 0.0), 10, 0.0, 0.0),  # more left than the limit: nothing owed
        (Budget(1_000, 0, 60.0), 5_000, 60.0, 60.0),  # bigger than the bucket: a window
    ],
)
def test_a_call_waits_only_for_what_it_needs_beyond_the_remaining_at_the_limits_pace(
    budget: Budget, need: int, debt: float, wait: float
) -> None:
    assert debt_s(budget, need) == pytest.approx(debt, abs=1e-3)
    assert wait_s(budget, need) == pytest.approx(wait, abs=1e-3)
    assert 0.0 <= (debt_s(budget, need) or 0.0) <= 60.0  # never over one window ahead


@pytest.mark.parametrize(
    "budget",
    [Budget(None, 10, 1.0), Budget(60_000, None, 1.0), Budget(0, 0, 1.0)],
    ids=["no-limit", "no-remaining", "zero-limit"],
)
def test_an_announcement_without_a_limit_or_a_remainder_sets_nothing(budget: Budget) -> None:
    assert debt_s(budget, 500) is None
    assert wait_s(budget, 500) == 0.0


@pytest.mark.parametrize(
    ("ahead", "cost", "turn"),
    [(0.0, 1.0, 0.0), (59.0, 1.0, 0.0), (59.5, 1.0, 0.5), (600.0, 1.0, 1.0), (10.0, 90.0, 10.0)],
)
def test_a_turn_is_what_the_call_costs_beyond_the_room_in_a_window(
    ahead: float, cost: float, turn: float
) -> None:
    assert turn_in(ahead, cost) == pytest.approx(turn)


OPENAI = AnnouncedLimits(requests=Budget(600, 599, 0.1), tokens=Budget(60_000, 100, 59.9))
ANTHROPIC = AnnouncedLimits(
    requests=Budget(50, 49, 1.0),
    tokens=Budget(8_000, 100, 60.0),  # the most restrictive of the two below
    input_tokens=Budget(40_000, 1_000, 58.0),
    output_tokens=Budget(8_000, 8_000, 0.0),
)


@pytest.mark.parametrize(
    ("announced", "kinds"),
    [
        (OPENAI, ["requests", "tokens"]),
        (ANTHROPIC, ["requests", "input_tokens", "output_tokens"]),
        (AnnouncedLimits(input_tokens=Budget(40_000, 0, 60.0)), ["input_tokens"]),
        (AnnouncedLimits(tokens=Budget(None, 5, 1.0)), []),  # no limit: not paced
    ],
    ids=["openai", "anthropic", "anthropic-input-only", "no-limit"],
)
def test_each_dialects_budgets_are_paced_by_kind(
    announced: AnnouncedLimits, kinds: list[str]
) -> None:
    assert list(paced_budgets(announced)) == kinds


def test_the_pace_is_each_budgets_limit_per_minute() -> None:
    assert pace_of(OPENAI) == Pace(requests=10.0, tokens=1_000.0)
    assert pace_of(ANTHROPIC) == Pace(50 / 60, None, 40_000 / 60, 8_000 / 60)


def test_a_call_weighs_its_input_and_its_max_tokens_on_the_budgets_announced_apart() -> None:
    weights = Weights.of_call(700, 400)
    assert (weights.tokens, weights.input_tokens, weights.output_tokens) == (700, 300, 400)
    assert Weights.of_call(100, 400).of("output_tokens") == 100
    found = corrections(ANTHROPIC, weights)
    assert [c.kind for c in found] == ["requests", "input_tokens", "output_tokens"]
    by_kind = {c.kind: c for c in found}
    # input: 39,000 owed at 666.7 a second, 58.5 s; this call's 300 tokens cost 0.45 s
    got = by_kind["input_tokens"]
    assert (got.per_unit_us, got.debt_us, got.cost_s) == pytest.approx((1_500.0, 58.5e6, 0.45))
    assert by_kind["input_tokens"].turn_s(58.5) == 0.0  # 1,000 left covers 300
    assert by_kind["output_tokens"].debt_us == 0.0  # the whole output budget is left
