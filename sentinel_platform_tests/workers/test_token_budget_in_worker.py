"""The fleet's token budget as users run it: two ``python -m workers.watch_transactions``
processes with ``SENTINEL_ANALYZER_API=openai`` against a real HTTP server speaking Chat
Completions that charges each call its prompt's tokens plus its ``max_tokens`` at
admission, as OpenAI does, and answers OpenAI's 429 beyond its budget.

What is promised: where the server announces its limits (``x-ratelimit-*``), the workers
learn them with no setting and stay under them (at most a handful of 429s while the first
answers arrive); where it announces nothing, ``SENTINEL_ANALYZER_TOKENS_PER_MINUTE`` keeps
them under it. Either way every verdict is the model's: a budget is waited for, never
turned into rules fallbacks. And where the minute's budget was already spent elsewhere
when the work starts (a shared key: the bucket starts empty), in either dialect (OpenAI's
``x-ratelimit-*`` with durations, Anthropic's input tokens with RFC 3339 resets), the
verdicts come steadily at the budget's refill, with few 429s: an announced budget is a
bucket refilling at its limit per minute, not what is left spread to its reset.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest

from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.harness.model_api_server import ModelApiServer
from sentinel_platform_tests.harness.processes import (
    Fleet,
    model_api_worker,
)
from sentinel_platform_tests.harness.waits import wait_until
from sentinel_platform_tests.workers.processors.test_transactions import BASE

MESSAGES = 40
#: 2,000 tokens a second, from a bucket of two seconds' worth: with calls of ~300 tokens,
#: a fleet that does not pace exceeds it within its first dozen calls.
TOKENS_PER_MINUTE = 120_000


#: The longest the fleet may go without a verdict while the budget refills: a few calls'
#: worth of refill, far below the minute a spread-to-the-reset pace stalled it for.
LONGEST_GAP_S = 10.0


@pytest.mark.parametrize("announced", [True, False], ids=["announced", "configured"])
def test_the_fleet_stays_under_a_token_budget_with_every_verdict_the_models(
    announced: bool,
    model_api_server: ModelApiServer,
    fleet: Fleet,
    settings: Settings,
    redis_client: RedisClient,
) -> None:
    server = model_api_server
    server.tokens_per_minute, server.bucket_s, server.announce = TOKENS_PER_MINUTE, 2.0, announced
    configured: dict[str, Any] = (
        {} if announced else {"analyzer_tokens_per_minute": TOKENS_PER_MINUTE}
    )
    workers = [
        model_api_worker(fleet, settings, f"tokens-{n}", analyzer_url=server.url, **configured)
        for n in range(2)
    ]
    for worker in workers:
        worker.wait_ready(redis_client, timeout_s=60)
    keys = transaction_keys(settings)
    for i in range(MESSAGES):
        redis_client.xadd(keys.stream, {"data": json.dumps({**BASE, "id": f"t-{i}"})})
    wait_until(
        lambda: redis_client.xlen(keys.results) == MESSAGES, timeout_s=120, what="every verdict"
    )
    results = [fields or {} for _, fields in redis_client.xrange(keys.results) or []]
    assert [r["driver_used"] for r in results] == ["analyzer"] * MESSAGES
    handful = 3 if announced else 0
    assert server.rate_limited <= handful, f"{server.rate_limited} calls refused with 429"
    assert server.admitted_tokens > 0
    for worker in workers:
        assert worker.stop() == 0, worker.tail()


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_fleet_starting_on_a_spent_budget_gets_verdicts_steadily_at_its_refill(
    api: str,
    model_api_server: ModelApiServer,
    fleet: Fleet,
    settings: Settings,
    redis_client: RedisClient,
) -> None:
    server = model_api_server
    server.tokens_per_minute, server.announce, server.starts_empty = TOKENS_PER_MINUTE, True, True
    workers = [
        model_api_worker(fleet, settings, f"spent-{n}", api=api, analyzer_url=server.url)
        for n in range(2)
    ]
    for worker in workers:
        worker.wait_ready(redis_client, timeout_s=60)
    keys = transaction_keys(settings)
    sent = redis_client.xadd(keys.stream, {"data": json.dumps({**BASE, "id": "s-0"})})
    for i in range(1, MESSAGES):
        redis_client.xadd(keys.stream, {"data": json.dumps({**BASE, "id": f"s-{i}"})})
    wait_until(
        lambda: redis_client.xlen(keys.results) == MESSAGES, timeout_s=90, what="every verdict"
    )
    entries = [(str(at), fields or {}) for at, fields in redis_client.xrange(keys.results) or []]
    assert [fields["driver_used"] for _, fields in entries] == ["analyzer"] * MESSAGES
    times = [int(str(sent).split("-")[0])] + [int(at.split("-")[0]) for at, _ in entries]
    gaps = [(later - earlier) / 1000 for earlier, later in itertools.pairwise(times)]
    assert max(gaps) <= LONGEST_GAP_S, f"the fleet stalled {max(gaps):.1f}s: {gaps}"
    refused, calls = server.rate_limited, len(server.charges)
    assert refused <= 2 * 4, f"{refused} of {calls} refused with 429: more than the first wave"
    for worker in workers:
        assert worker.stop() == 0, worker.tail()
