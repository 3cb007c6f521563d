"""The fleet's first wave, as users start it: three ``python -m workers.watch_transactions``
processes on defaults against a real HTTP server speaking Chat Completions or Messages
whose token bucket starts empty (the minute's budget spent elsewhere on a shared key) and
that announces its limits on every answer, 429s included, in the dialect's headers.

What is promised: while the fleet knows nothing of the limits, one call goes out
fleet-wide and the others wait for its answer, so at most that one call is refused before
the fleet paces from what the answer announced; every verdict is still the model's.
"""

from __future__ import annotations

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

MESSAGES = 24
WORKERS = 3
#: 2,000 tokens a second, from a bucket of two seconds' worth that starts empty.
TOKENS_PER_MINUTE = 120_000
#: The calls sent within this long of the fleet's first one are its first wave: before
#: any answer could announce anything.
FIRST_WAVE_S = 0.5


@pytest.mark.parametrize("api", ["openai", "anthropic"])
def test_a_fleet_starting_on_a_spent_budget_sends_one_call_before_it_knows_the_limits(
    api: str,
    model_api_server: ModelApiServer,
    fleet: Fleet,
    settings: Settings,
    redis_client: RedisClient,
) -> None:
    server = model_api_server
    server.tokens_per_minute, server.bucket_s = TOKENS_PER_MINUTE, 2.0
    server.announce, server.starts_empty = True, True
    workers = [
        model_api_worker(fleet, settings, f"wave-{n}", api=api, analyzer_url=server.url)
        for n in range(WORKERS)
    ]
    for worker in workers:
        worker.wait_ready(redis_client, timeout_s=60)
    keys = transaction_keys(settings)
    burst = redis_client.pipeline(transaction=False)
    for i in range(MESSAGES):  # all at once: every worker's every thread has one
        burst.xadd(keys.stream, {"data": json.dumps({**BASE, "id": f"w-{i}"})})
    burst.execute()
    wait_until(
        lambda: redis_client.xlen(keys.results) == MESSAGES, timeout_s=90, what="every verdict"
    )
    results = [fields or {} for _, fields in redis_client.xrange(keys.results) or []]
    assert [r["driver_used"] for r in results] == ["analyzer"] * MESSAGES
    charges: list[Any] = list(server.charges)
    first = charges[0][0]
    wave = [admitted for at, _, admitted in charges if at < first + FIRST_WAVE_S]
    refused = wave.count(False)
    timeline = [(round(at - first, 3), cost, ok) for at, cost, ok in charges[:8]]
    assert refused <= 1, f"{refused} of the first wave's {len(wave)} calls refused: {timeline}"
    for worker in workers:
        assert worker.stop() == 0, worker.tail()
