"""Tokens are the unit of the analyzer's limits: the fleet's token budget.

The pure decisions (a call's reservation, what a settle returns, the pace an announced
budget asks for, the daily reset) are table-tested; the scripts run on the suite's real
redis-server, several clients sharing one budget as a fleet's workers do.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import datetime, timezone

import pytest

from sentinel_platform.streams.consumer.processor import Busy
from sentinel_platform.streams.plumbing.connection import RedisClient
from workers.analyzer.announced_limits import AnnouncedLimits, Budget
from workers.analyzer.replies import AnalyzerExhausted, Usage
from workers.analyzer.token_budget import (
    Pace,
    TokenBudget,
    budget_key,
    pace_of,
    paced_rate,
    reservation,
    seconds_to_midnight,
    settled,
)

# --- pure decisions -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("chars", "max_tokens", "expected"),
    [(0, 400, 400), (1, 400, 401), (400, 400, 500), (401, 0, 101), (8, -5, 2)],
)
def test_a_call_reserves_its_prompts_estimate_plus_its_max_tokens(
    chars: int, max_tokens: int, expected: int
) -> None:
    assert reservation(chars, max_tokens) == expected


@pytest.mark.parametrize(
    ("api", "reserved", "max_tokens", "usage", "back"),
    [
        # OpenAI keeps counting max_tokens: only the prompt's estimate is corrected
        ("openai", 500, 400, Usage(70, 30), 30),
        ("openai", 500, 400, Usage(150, 30), -50),  # the estimate was short: charge on top
        # the others charge what was used: the unused output comes back
        ("anthropic", 500, 400, Usage(70, 30), 400),
        ("sentinel", 100, 0, Usage(60, 10), 30),
        ("openai", 500, 400, None, 0),  # no usage: the reservation stands
    ],
)
def test_a_settle_returns_what_the_api_did_not_charge(
    api: str, reserved: int, max_tokens: int, usage: Usage | None, back: int
) -> None:
    assert settled(api, reserved, max_tokens, usage) == back


@pytest.mark.parametrize(
    ("budget", "rate", "pause"),
    [
        (None, None, 0.0),
        (Budget(None, 10, 1.0), None, 0.0),  # no limit announced: nothing to learn
        (Budget(60_000, None, None), 1000.0, 0.0),  # the limit per minute
        (Budget(60_000, 59_000, 0.5), 1000.0, 0.0),  # plenty left: the steady rate
        (Budget(60_000, 12_000, 6.0), 1000.0, 0.0),  # exactly the low mark: still steady
        (Budget(60_000, 6_000, 12.0), 500.0, 0.0),  # low: what is left spread to the reset
        (Budget(60_000, 6_000, 1.0), 1000.0, 0.0),  # spread, but never faster than steady
        (Budget(60_000, 0, 7.5), 1000.0, 7.5),  # nothing left: wait for the reset
        (Budget(600, 30, 0.0), 600 / 60, 0.0),  # a reset of 0 never divides by zero
    ],
)
def test_an_announced_budget_paces_at_its_limit_and_spreads_a_low_remainder_to_its_reset(
    budget: Budget | None, rate: float | None, pause: float
) -> None:
    assert paced_rate(budget) == (rate, pause)


def test_the_pace_of_an_answer_takes_both_budgets_and_the_longer_pause() -> None:
    announced = AnnouncedLimits(Budget(600, 0, 2.0), Budget(60_000, 60_000, 0.0))
    assert pace_of(announced) == Pace(1000.0, 10.0, 2.0)
    anthropic = AnnouncedLimits(None, None, Budget(120_000, 120_000, 1.0))
    assert pace_of(anthropic) == Pace(2000.0, None, 0.0)


@pytest.mark.parametrize(
    ("now", "left"),
    [
        (datetime(2026, 11, 27, 0, 0, 0, tzinfo=timezone.utc), 86_400.0),
        (datetime(2026, 11, 27, 23, 59, 30, tzinfo=timezone.utc), 30.0),
        (datetime(2026, 12, 31, 12, 0, 0, tzinfo=timezone.utc), 43_200.0),
        (datetime.fromisoformat("2026-11-27T20:00:00-05:00"), 82_800.0),  # 01:00 UTC
    ],
)
def test_a_daily_budget_renews_at_midnight_utc(now: datetime, left: float) -> None:
    assert seconds_to_midnight(now) == left


# --- on a real Redis ----------------------------------------------------------------


def budget(clients: Callable[[], RedisClient], **kwargs: int) -> TokenBudget:
    made = TokenBudget("svc", kwargs.get("tpm"), kwargs.get("daily"))
    made.bind(clients())
    return made


def test_clients_share_one_token_budget_and_a_settle_returns_the_unused_tokens(
    clients: Callable[[], RedisClient], redis_client: RedisClient
) -> None:
    # 6,000 tokens a minute: 100 a second, so a 200-token call takes the budget's next 2 s
    first, second = budget(clients, tpm=6_000), budget(clients, tpm=6_000)
    first.reserve(200)  # an idle budget: at once
    tokens_key = budget_key("svc", "tokens")
    assert 1_800 < int(redis_client.pttl(tokens_key)) <= 2_000
    with pytest.raises(Busy) as refused:  # another worker's call: its turn is 2 s away
        second.reserve(200)
    assert refused.value.retry_after_s is not None and 1.0 < refused.value.retry_after_s <= 2.0
    assert 1_500 < int(redis_client.pttl(tokens_key)) <= 2_000  # a refusal reserves nothing
    # the first call used 50 of its 200 tokens: 150 come back, 1.5 s of the budget
    first.settle("anthropic", 200, 0, Usage(50, 0))
    assert int(redis_client.pttl(tokens_key)) <= 500
    second.reserve(200)  # now within the bound: reserved, and its turn waited for
    assert 1_500 < int(redis_client.pttl(tokens_key)) <= 2_500
    # every key one script touches shares the analyzer's hash tag (Redis Cluster)
    assert all("{svc}" in key for key in redis_client.keys("sentinel:analyzer:*"))


def test_a_worker_learns_an_announced_budget_for_the_whole_fleet(
    clients: Callable[[], RedisClient],
) -> None:
    unpaced = TokenBudget("other", None, None)
    unpaced.bind(clients())
    unpaced.reserve(1_000)
    unpaced.reserve(1_000)  # nothing configured, nothing learnt: no limit at all
    learner, other = budget(clients), budget(clients)
    pause = learner.learn(
        {
            "x-ratelimit-limit-tokens": "6000",
            "x-ratelimit-remaining-tokens": "5900",
            "x-ratelimit-reset-tokens": "1s",
        }
    )
    assert pause == 0.0
    other.reserve(300)  # the fleet now paces at 100 tokens a second: 3 s taken
    with pytest.raises(Busy):
        other.reserve(300)


def test_a_spent_daily_budget_is_exhausted_until_midnight_utc(
    clients: Callable[[], RedisClient],
) -> None:
    first, second = budget(clients, daily=1_000), budget(clients, daily=1_000)
    first.reserve(500)
    first.settle("openai", 500, 400, Usage(600, 300))  # 900 used today
    second.reserve(500)  # 900 of 1,000: still allowed
    second.settle("openai", 500, 400, Usage(100, 50))  # 1,050
    with pytest.raises(AnalyzerExhausted) as spent:
        first.reserve(500)
    assert spent.value.cause == "daily_tokens"
    assert "SENTINEL_ANALYZER_DAILY_TOKENS=1000" in str(spent.value)
    now = datetime.now(timezone.utc)
    assert spent.value.until_s is not None
    assert abs(spent.value.until_s - seconds_to_midnight(now)) < 5


def test_a_wait_for_a_turn_ends_at_the_workers_stop_with_no_call(
    clients: Callable[[], RedisClient],
) -> None:
    paced = budget(clients, tpm=6_000)
    stop = threading.Event()
    paced.bind_stop(stop)
    paced.reserve(90)  # the next turn is 0.9 s away, within the bound
    stop.set()
    with pytest.raises(Busy) as stopped:
        paced.reserve(90)
    assert "stopping" in stopped.value.reason
