"""The fleet's token budget as users run it: two ``python -m workers.watch_transactions``
processes with ``SENTINEL_ANALYZER_API=openai`` against a real HTTP server speaking Chat
Completions that charges each call its prompt's tokens plus its ``max_tokens`` at
admission, as OpenAI does, and answers OpenAI's 429 beyond its budget.

What is promised: where the server announces its limits (``x-ratelimit-*``), the workers
learn them with no setting and stay under them (at most a handful of 429s while the first
answers arrive); where it announces nothing, ``SENTINEL_ANALYZER_TOKENS_PER_MINUTE`` keeps
them under it. Either way every verdict is the model's: a budget is waited for, never
turned into rules fallbacks.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import pytest

from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.harness.model_api_server import ModelApiServer
from sentinel_platform_tests.harness.processes import FAST_TIMINGS, Fleet, WorkerProcess, child_env
from sentinel_platform_tests.harness.waits import wait_until
from sentinel_platform_tests.workers.processors.test_transactions import BASE

MESSAGES = 40
#: 2,000 tokens a second, from a bucket of two seconds' worth: with calls of ~300 tokens,
#: a fleet that does not pace exceeds it within its first dozen calls.
TOKENS_PER_MINUTE = 120_000
MAX_OUTPUT_TOKENS = 100


def start(fleet: Fleet, settings: Settings, name: str, **values: Any) -> WorkerProcess:
    env = child_env(
        settings.redis_url_value,
        settings.home_dir,
        analyzer_api="openai",
        analyzer_model="gpt-4o-mini",
        analyzer_max_output_tokens=MAX_OUTPUT_TOKENS,
        worker_concurrency=4,
        **values,
    )
    env.update(FAST_TIMINGS)
    command = [sys.executable, "-m", "workers.watch_transactions", "--consumer", name]
    child = fleet.spawn(name, command, env)
    return WorkerProcess(child.proc, child.name, None, child.log_path, env, "transactions")


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
    configured = {} if announced else {"analyzer_tokens_per_minute": TOKENS_PER_MINUTE}
    workers = [
        start(fleet, settings, f"tokens-{n}", analyzer_url=server.url, **configured)
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
    results = [fields for _, fields in redis_client.xrange(keys.results)]
    assert [r["driver_used"] for r in results] == ["analyzer"] * MESSAGES
    handful = 3 if announced else 0
    assert server.rate_limited <= handful, f"{server.rate_limited} calls refused with 429"
    assert server.admitted_tokens > 0
    for worker in workers:
        assert worker.stop() == 0, worker.tail()
