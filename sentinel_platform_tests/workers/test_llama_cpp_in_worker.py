"""A real model behind a real OpenAI-compatible server: ``python -m workers.watch_transactions``
on defaults plus docs/analyzer.md's llama.cpp recipe, against llama.cpp's Python server serving
SmolLM2-135M-Instruct (``make test-llm``; skipped without the ``llm`` extra unless
``REQUIRE_LLM_TESTS=1``).

What is promised: every verdict is the model's (``driver_used=analyzer``), validates against
the stream's verdict model, and records the model, the prompt's version and the tokens; the
server's queue (capacity 1, seconds a call) is met by the adaptive limit, with the recipe's
``SENTINEL_ANALYZER_TIMEOUT_S``: no rules fallback, no timeout, no breaker (the judgement is
shared with the ``sentinel up`` test: :mod:`~sentinel_platform_tests.harness.llama_verdicts`).
"""

from __future__ import annotations

import json
import sys

import pytest

from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.harness.llama_server import LlamaServer
from sentinel_platform_tests.harness.llama_verdicts import (
    RESULTS_TIMEOUT_S,
    assert_the_models_verdicts,
    recipe_settings,
    trouble,
)
from sentinel_platform_tests.harness.processes import Fleet, WorkerProcess, child_env
from sentinel_platform_tests.harness.waits import wait_until
from sentinel_platform_tests.workers.processors.test_transactions import BASE

pytestmark = [pytest.mark.llm, pytest.mark.slow]

MESSAGES = 8


def start_worker_on(fleet: Fleet, settings: Settings, server: LlamaServer) -> WorkerProcess:
    """The worker as a user starts it: defaults (adaptive in-flight limit), the recipe."""
    env = child_env(settings.redis_url_value, settings.home_dir, **recipe_settings(server))
    name = "llama-transactions"  # the consumer's name, which its lease is keyed by
    command = [sys.executable, "-m", "workers.watch_transactions", "--consumer", name]
    child = fleet.spawn(name, command, env)
    return WorkerProcess(child.proc, child.name, None, child.log_path, env, "transactions")


def test_every_verdict_is_the_real_models_and_schema_valid(
    llama_server: LlamaServer, fleet: Fleet, settings: Settings, redis_client: RedisClient
) -> None:
    keys = transaction_keys(settings)
    worker = start_worker_on(fleet, settings, llama_server)
    worker.wait_ready(redis_client, timeout_s=60)
    for i in range(MESSAGES):
        redis_client.xadd(keys.stream, {"data": json.dumps({**BASE, "id": f"t-{i}"})})
    wait_until(
        lambda: redis_client.xlen(keys.results) >= MESSAGES,
        timeout_s=RESULTS_TIMEOUT_S,
        interval_s=0.5,
        what=f"{MESSAGES} verdicts from the real model",
    )
    results = [fields for _, fields in redis_client.xrange(keys.results)]
    assert len(results) == MESSAGES, "one verdict per transaction"
    context = f"{worker.tail()}\n{llama_server.tail()}"
    assert_the_models_verdicts(results, llama_server, settings.home_dir, context)
    assert worker.stop() == 0, worker.tail()
    assert not trouble(worker.text()), worker.tail(40)
