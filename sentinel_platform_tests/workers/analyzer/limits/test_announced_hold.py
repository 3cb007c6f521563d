"""A pause from an announced limit is a fleet hold like any other.

An analyzer client built as a worker builds it calls the harness's Chat Completions server
whose minute budget is spent (the bucket starts empty) and which announces it
(``x-ratelimit-*``): the 429's announcement says the next call's tokens take seconds to
refill, longer than a call waits on its thread, so the fleet is held with the cause
``announced_limit`` for about that long. The worker's next call is held without being
sent (with the hold's cause and seconds left, for its INFO line), and ``sentinel status``
shows the hold with its seconds left, in text and JSON.
"""

from __future__ import annotations

import json

import pytest

from sentinel_platform.schemas import Transaction
from sentinel_platform.settings import Settings, load_settings
from sentinel_platform.streams.consumer.processor import Busy
from sentinel_platform.streams.operators import analyzer_holds as holds
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform_tests.harness.cli import run_sentinel
from sentinel_platform_tests.harness.model_api_server import ModelApiServer
from sentinel_platform_tests.harness.processes import child_env
from sentinel_platform_tests.workers.processors.test_transactions import BASE
from workers.analyzer import analyzer_from_settings
from workers.analyzer.limits.fleet_limits import FleetHeld
from workers.processors.transactions import PROMPT

#: 100 tokens a second: a call of a few hundred tokens takes seconds to refill.
TOKENS_PER_MINUTE = 6_000


def test_an_announced_budget_with_no_room_for_seconds_holds_the_fleet_and_says_so(
    model_api_server: ModelApiServer, settings: Settings, redis_client: RedisClient
) -> None:
    server = model_api_server
    server.tokens_per_minute, server.announce, server.starts_empty = TOKENS_PER_MINUTE, True, True
    configured = load_settings(
        redis_url=settings.redis_url_value,
        home=settings.home_dir,
        analyzer_url=server.url,
        analyzer_api="openai",
        analyzer_model="gpt-4o-mini",
        analyzer_max_output_tokens=100,
        analyzer_id="spent-key",
    )
    analyzer = analyzer_from_settings(configured, PROMPT)
    assert analyzer is not None
    analyzer.bind_redis(redis_client)
    txn = Transaction.from_fields({"data": json.dumps({**BASE, "id": "t-1"})})
    with pytest.raises(Busy):  # the 429 of a spent budget, its announcement read
        analyzer.assess_transaction(txn)
    assert server.rate_limited == 1
    with pytest.raises(FleetHeld) as held:  # the next call is held, not sent
        analyzer.assess_transaction(txn)
    assert held.value.cause == holds.ANNOUNCED_LIMIT
    assert held.value.left_s is not None and 1.0 < held.value.left_s < 10.0
    assert len(server.requests) == 1

    env = child_env(settings.redis_url_value, settings.home_dir)
    (shown,) = json.loads(run_sentinel(env, "status", "--json").out)["analyzer_holds"]
    assert (shown["analyzer_id"], shown["cause"]) == ("spent-key", "announced_limit")
    assert 0 < shown["seconds_left"] < 10
    text = run_sentinel(env, "status").out
    assert "analyzer hold: spent-key" in text and "announced_limit" in text, text
    analyzer.close()
