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
from workers.analyzer.answers.replies import AnalyzerExhausted, Usage
from workers.analyzer.limits.token_budget import (
    TokenBudget,
    budget_key,
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


def openai_headers(limit: int, remaining: int, reset: str) -> dict[str, str]:
    return {
        "x-ratelimit-limit-tokens": str(limit),
        "x-ratelimit-remaining-tokens": str(remaining),
        "x-ratelimit-reset-tokens": reset,
    }


def ahead_ms(redis_client: RedisClient, kind: str = "tokens") -> int:
    """How far ahead of now the fleet's state of an announced budget is (0: idle)."""
    return max(0, int(redis_client.pttl(budget_key("svc", f"announced:{kind}"))))


def test_a_worker_learns_an_announced_budget_for_the_whole_fleet(
    clients: Callable[[], RedisClient],
) -> None:
    unpaced = TokenBudget("other", None, None)
    unpaced.bind(clients())
    unpaced.reserve(1_000)
    unpaced.reserve(1_000)  # nothing configured, nothing learnt: no limit at all
    learner, other = budget(clients), budget(clients)
    assert learner.learn(openai_headers(6_000, 100, "59s")) == 0.0  # 100 a second
    other.reserve(100)  # the 100 left: at once
    with pytest.raises(Busy) as later:  # 300 more: 3 s of refill, past the bound
        other.reserve(300)
    assert later.value.retry_after_s == pytest.approx(3.0, abs=0.1)


def test_one_low_announcement_never_stalls_the_fleet_and_a_full_one_ends_its_wait(
    clients: Callable[[], RedisClient], redis_client: RedisClient
) -> None:
    learner, other = budget(clients), budget(clients)
    learner.learn(openai_headers(200_000, 100, "59.9s"))  # 100 of 200,000 left
    assert ahead_ms(redis_client) <= 60_000  # never more than one window ahead
    for _ in range(3):  # 500 tokens need 400 more than is left: 0.12 s of refill each
        other.reserve(500)
        assert ahead_ms(redis_client) <= 61_000
    before = ahead_ms(redis_client)
    # an answer to a call that reserved nothing (sent before anything was learnt): what
    # the fleet reserved since is unknown, so it may lengthen the state, never shorten it
    learner.learn(openai_headers(200_000, 200_000, "0s"))
    assert ahead_ms(redis_client) >= before - 100
    learner.reserve(500)
    learner.learn(openai_headers(200_000, 200_000, "0s"))  # its answer: all there
    assert ahead_ms(redis_client) == 0
    for _ in range(20):  # 10,000 tokens of the 200,000 at once, no wait, no refusal
        other.reserve(500)
    assert 2_900 <= ahead_ms(redis_client) <= 3_100  # 10,000 at 3,333 a second


def test_an_announcement_counts_the_calls_the_fleet_reserved_after_the_announcing_one(
    clients: Callable[[], RedisClient], redis_client: RedisClient
) -> None:
    learner, other = budget(clients), budget(clients)
    learner.learn(openai_headers(6_000, 0, "60s"))  # spent: 100 tokens a second
    learner.reserve(50)  # this thread's call, its answer announcing below
    other.reserve(50)  # another worker's, after it: the server has not seen it yet
    before = ahead_ms(redis_client)
    # the answer: the server charged 50, and refilled the rest: 5,950 of 6,000 left
    learner.learn(openai_headers(6_000, 5_950, "0.5s"))
    assert 900 <= ahead_ms(redis_client) <= 1_000  # its 50 and the other's 50, at 100/s
    assert ahead_ms(redis_client) < before  # shortened: the announcement corrects


def test_an_announced_pause_past_the_bound_is_returned_for_a_fleet_hold(
    clients: Callable[[], RedisClient],
) -> None:
    learner = budget(clients)
    learner.learn(openai_headers(6_000, 6_000, "0s"))
    learner.reserve(500)
    # a 429 of the same call size: 20 left, 500 needed, 4.8 s at 100 tokens a second
    assert learner.learn(openai_headers(6_000, 20, "59.8s")) == pytest.approx(4.8, abs=0.1)
    learner.reserve(5)  # a small call still fits the 20 left (the next answer corrects)
    assert learner.learn(openai_headers(6_000, 6_000, "0s")) == 0.0  # whole: no pause


def test_anthropic_input_and_output_budgets_are_paced_apart(
    clients: Callable[[], RedisClient], redis_client: RedisClient
) -> None:
    learner = TokenBudget("svc", None, None, max_output_tokens=400)
    learner.bind(clients())
    learner.learn(
        {
            "anthropic-ratelimit-input-tokens-limit": "6000",
            "anthropic-ratelimit-input-tokens-remaining": "0",
            "anthropic-ratelimit-input-tokens-reset": "2099-01-01T00:00:00Z",
            "anthropic-ratelimit-output-tokens-limit": "60000",
            "anthropic-ratelimit-output-tokens-remaining": "60000",
            "anthropic-ratelimit-output-tokens-reset": "2099-01-01T00:00:00Z",
        }
    )
    learner.reserve(450)  # 50 input (0.5 s at 100 a second), 400 output (0.4 s of room)
    assert 59_500 <= ahead_ms(redis_client, "input_tokens") <= 60_600  # after its 0.5 s turn
    assert 300 <= ahead_ms(redis_client, "output_tokens") <= 400
    assert ahead_ms(redis_client, "tokens") == 0  # the combined budget is not announced


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
