"""The daily token budget as users run it: ``python -m sentinel_platform.workers
transactions`` with ``SENTINEL_ANALYZER_API=openai`` and ``SENTINEL_ANALYZER_DAILY_TOKENS``
against a real HTTP server speaking Chat Completions that cuts a share of its answers at
``max_tokens`` (``finish_reason: "length"``, billed in full), as OpenAI documents it.

What is promised: what the server billed is what the platform counted, in the daily
counter, in ``analyzer_tokens_total`` and in the result entries (a cut answer's fallback
entry records its tokens); the budget is a cap, overshot by at most what was in flight
when it ran out; and a spent budget is a fleet hold until midnight UTC that ``sentinel
status`` shows and ``sentinel analyzer release`` ends, under ``WHEN_DOWN=wait`` too.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from sentinel_platform.settings import Settings
from sentinel_platform.streams.operators.analyzer_holds import analyzer_key_id
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.harness.cli import run_sentinel
from sentinel_platform_tests.harness.model_api_server import ModelApiServer
from sentinel_platform_tests.harness.processes import (
    FAST_TIMINGS,
    Child,
    Fleet,
    child_env,
    wait_leases,
)
from sentinel_platform_tests.harness.waits import wait_until
from sentinel_platform_tests.workers.processors.test_transactions import BASE
from sentinel_platform_tests.workers.test_analyzer_exhausted_in_worker import events
from sentinel_platform_tests.workers.test_analyzer_in_worker import scrape_samples
from workers.analyzer.limits.token_budget import budget_key, seconds_to_midnight

DAILY_TOKENS = 3000
MAX_OUTPUT_TOKENS = 100
MESSAGES = 30
WORKERS, CONCURRENCY = 2, 2


def start(
    fleet: Fleet, settings: Settings, name: str, url: str, concurrency: int, **values: Any
) -> Child:
    env = child_env(
        settings.redis_url_value,
        settings.home_dir,
        analyzer_url=url,
        analyzer_api="openai",
        analyzer_model="gpt-4o-mini",
        analyzer_max_output_tokens=MAX_OUTPUT_TOKENS,
        **values,
    )
    env.update(FAST_TIMINGS)  # a stopped worker's messages are taken over at once
    extra = ["--metrics-port", "0", "--concurrency", str(concurrency)]
    return fleet.worker("transactions", name, env, extra=extra)


def add_transactions(redis_client: RedisClient, settings: Settings, prefix: str) -> None:
    keys = transaction_keys(settings)
    for i in range(MESSAGES):
        redis_client.xadd(keys.stream, {"data": json.dumps({**BASE, "id": f"{prefix}-{i}"})})


def entries(redis_client: RedisClient, stream: str) -> list[dict[str, str]]:
    """A stream's entries' fields, as text."""
    found = redis_client.xrange(stream) or []
    return [{str(k): str(v) for k, v in (fields or {}).items()} for _, fields in found]


def counted_today(redis_client: RedisClient, url: str) -> int:
    day = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    return int(redis_client.get(budget_key(analyzer_key_id(url), f"day:{day}")) or 0)


def scraped_tokens(worker: Child) -> int:
    """The worker's ``analyzer_tokens_total``, input plus output, every model."""
    (serving,) = events(worker, "metrics_serving")
    samples = scrape_samples(serving["url"])
    return int(
        sum(
            value
            for name, value in samples.items()
            if name.startswith("sentinel_worker_analyzer_tokens_total{")
            and ('kind="input"' in name or 'kind="output"' in name)
        )
    )


def test_every_billed_token_is_counted_and_the_daily_budget_is_a_cap(
    model_api_server: ModelApiServer,
    fleet: Fleet,
    settings: Settings,
    redis_client: RedisClient,
) -> None:
    server = model_api_server
    server.cut_every = 5  # a fifth of the answers cut at max_tokens, billed all the same
    workers = [
        start(
            fleet,
            settings,
            f"daily-{n}",
            server.url,
            CONCURRENCY,
            analyzer_daily_tokens=DAILY_TOKENS,
        )
        for n in range(WORKERS)
    ]
    keys = transaction_keys(settings)
    wait_leases(redis_client, keys, workers, timeout_s=60)
    add_transactions(redis_client, settings, "daily")
    wait_until(
        lambda: redis_client.xlen(keys.results) == MESSAGES, timeout_s=60, what="every verdict"
    )
    results = entries(redis_client, keys.results)
    assert server.cut >= 1, "some answers were cut"
    assert {r["driver_used"] for r in results} == {"analyzer", "fallback"}
    in_results = sum(
        int(r.get("input_tokens", 0)) + int(r.get("output_tokens", 0)) for r in results
    )
    billed = server.billed_tokens
    assert counted_today(redis_client, server.url) == billed, "the daily counter"
    assert in_results == billed, "the result entries"
    assert sum(scraped_tokens(w) for w in workers) == billed, "analyzer_tokens_total"
    # What was in flight when it ran out: at most every call the fleet may have under way.
    overshoot = WORKERS * CONCURRENCY * server.largest_bill
    assert DAILY_TOKENS <= billed <= DAILY_TOKENS + overshoot, (billed, overshoot)
    cut = [r for r in results if r["driver_used"] == "fallback" and "output_tokens" in r]
    assert len(cut) == server.cut and all(r["output_tokens"] == "100" for r in cut)
    assert all(r["model"] == "gpt-4o-mini-2024-07-18" for r in cut)
    for worker in workers:
        assert worker.stop() == 0, worker.log_tail()


def test_a_spent_daily_budget_is_a_hold_shown_by_status_and_ended_by_a_release(
    model_api_server: ModelApiServer,
    fleet: Fleet,
    settings: Settings,
    redis_client: RedisClient,
) -> None:
    server = model_api_server
    keys = transaction_keys(settings)
    analyzer_id = analyzer_key_id(server.url)
    worker = start(
        fleet,
        settings,
        "daily-wait",
        server.url,
        1,
        analyzer_daily_tokens=DAILY_TOKENS,
        analyzer_when_down="wait",
    )
    wait_leases(redis_client, keys, [worker], timeout_s=60)
    add_transactions(redis_client, settings, "wait")
    status_env = child_env(settings.redis_url_value, settings.home_dir)

    def holds() -> list[dict[str, Any]]:
        shown = run_sentinel(status_env, "status", "--json")
        return list(json.loads(shown.out)["analyzer_holds"])

    (hold,) = wait_until(holds, timeout_s=60, what="sentinel status shows the hold")
    assert (hold["analyzer_id"], hold["cause"]) == (analyzer_id, "exhausted"), hold
    assert hold["reason"].startswith("daily_tokens: daily token budget spent"), hold
    to_midnight = seconds_to_midnight(datetime.now(timezone.utc))
    assert to_midnight - 60 < hold["seconds_left"] <= to_midnight + 1, hold
    text = run_sentinel(status_env, "status").out
    assert f"analyzer hold: {analyzer_id}" in text and "daily_tokens" in text, text
    called = len(server.seen())
    decided = redis_client.xlen(keys.results)
    assert decided < MESSAGES and redis_client.xlen(keys.dlq) == 0, "the rest wait"
    assert worker.stop() == 0, worker.log_tail()
    assert len(server.seen()) == called, "no call once held"

    # Released, and the budget raised (a restart with the new setting): every message
    # waiting is decided by the model.
    released = run_sentinel(status_env, "analyzer", "release")
    assert released.code == 0 and analyzer_id in released.out, released.out + released.err
    assert holds() == []
    raised = start(
        fleet,
        settings,
        "daily-raised",
        server.url,
        1,
        analyzer_daily_tokens=100 * DAILY_TOKENS,
        analyzer_when_down="wait",
    )
    wait_until(
        lambda: redis_client.xlen(keys.results) == MESSAGES,
        timeout_s=60,
        what="every message decided once the hold is released",
    )
    results = entries(redis_client, keys.results)
    assert [r["driver_used"] for r in results] == ["analyzer"] * MESSAGES, "none fell back"
    assert raised.stop() == 0, raised.log_tail()
