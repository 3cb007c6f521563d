"""A fleet's hold on the analyzer, end to end: a real worker process started during a
long hold makes no call at all and says so, operators see the hold (``sentinel status``)
and end it (``sentinel analyzer release``), and the worker then calls again.

Also in-process on the real Redis: threads arriving together at a fresh client all wait
for its first read of the hold, and a release reaches a client within its refresh.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable

from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.harness.analyzer_server import AnalyzerServer
from sentinel_platform_tests.harness.cli import run_sentinel
from sentinel_platform_tests.harness.processes import Fleet, child_env, wait_leases
from sentinel_platform_tests.harness.waits import wait_until
from sentinel_platform_tests.workers.processors.test_transactions import BASE
from workers.analyzer.limits.fleet_limits import FleetLimits, analyzer_key_id

HOUR_MS = 3_600_000
SECRET = "H0ld-S3cret"
MESSAGES = 20
CONCURRENCY = 16


def hold_record(analyzer_id: str, reason: str) -> str:
    """A hold as a worker stores it, written here by hand: the test owns the format."""
    return json.dumps(
        {
            "cause": "retry_after",
            "reason": reason,
            "analyzer_id": analyzer_id,
            "analyzer": "http://127.0.0.1/assess",
            "set_at": 1_700_000_000.0,
            "held_s": 3600,
        }
    )


def test_a_worker_started_during_a_hold_makes_no_call_until_an_operator_releases_it(
    analyzer_server: AnalyzerServer,
    fleet: Fleet,
    settings: Settings,
    redis_client: RedisClient,
) -> None:
    url = analyzer_server.url.replace("http://", f"http://bot:{SECRET}@", 1)
    analyzer_id = analyzer_key_id(url)
    hold_key = f"sentinel:analyzer:{analyzer_id}:hold"
    redis_client.set(hold_key, hold_record(analyzer_id, "HTTP 429 with Retry-After 3600s"))
    redis_client.pexpire(hold_key, HOUR_MS)
    env = child_env(settings.redis_url_value, settings.home_dir, analyzer_url=url)
    keys = transaction_keys(settings)
    extra = ["--concurrency", str(CONCURRENCY)]
    worker = fleet.worker("transactions", "held-worker", env, extra=extra)
    wait_leases(redis_client, keys, [worker], timeout_s=60)
    for index in range(MESSAGES):
        redis_client.xadd(keys.stream, {"data": json.dumps({**BASE, "id": f"held-{index}"})})
    wait_until(  # as many as it may call at once: each was held back before its call
        lambda: redis_client.xpending(keys.stream, keys.group)["pending"] >= CONCURRENCY,
        timeout_s=60,
        what="the worker takes a message for each of its calls",
    )
    assert analyzer_server.requests == [], "a held fleet makes no call"
    (busy,) = wait_until(
        lambda: worker.events("analyzer_busy"), timeout_s=60, what="the worker logs the hold"
    )
    assert (busy["analyzer_id"], busy["cause"]) == (analyzer_id, "retry_after")
    assert 3500 < busy["held_s"] <= 3600, busy

    status_env = child_env(settings.redis_url_value, settings.home_dir)
    shown = run_sentinel(status_env, "status", "--json")
    (hold,) = json.loads(shown.out)["analyzer_holds"]
    assert (hold["analyzer_id"], hold["cause"]) == (analyzer_id, "retry_after")
    assert 3500 < hold["seconds_left"] <= 3600 and hold["analyzer"].startswith("http://")
    text = run_sentinel(status_env, "status").out
    assert f"analyzer hold: {analyzer_id}" in text and "retry_after" in text, text

    released = run_sentinel(status_env, "analyzer", "release")
    assert released.code == 0, released.err
    assert analyzer_id in released.out
    wait_until(
        lambda: redis_client.xlen(keys.results) == MESSAGES,
        timeout_s=60,
        what="every message answered once the hold is released",
    )
    assert len(analyzer_server.requests) == MESSAGES
    assert worker.stop() == 0, worker.tail()
    assert "analyzer_recovered" in worker.text()
    for output in (worker.text(), shown.out, text, released.out):
        assert SECRET not in output


def test_threads_arriving_together_at_a_fresh_client_all_see_the_hold(
    clients: Callable[[], RedisClient], redis_client: RedisClient
) -> None:
    FleetLimits("burst-svc", client=clients()).hold(3600.0, "HTTP 429 with Retry-After 3600s")
    fresh = FleetLimits("burst-svc", client=clients())
    start = threading.Barrier(16)
    seen: list[float] = []

    def arrive() -> None:
        start.wait(10)
        seen.append(fresh.held_for())

    threads = [threading.Thread(target=arrive) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(seen) == 16 and all(3500 < left <= 3600 for left in seen), seen


def test_a_release_reaches_a_client_holding_within_its_refresh(
    clients: Callable[[], RedisClient], redis_client: RedisClient
) -> None:
    limits = FleetLimits("release-svc", client=clients())
    limits.hold(None, "monthly quota used up", cause="exhausted")
    assert int(redis_client.pttl(limits.hold_key)) == -1, "no end: only a release ends it"
    assert limits.held_for() == float("inf")
    limits.hold(5.0, "HTTP 429 with Retry-After 5s")  # never shortens an endless hold
    assert int(redis_client.pttl(limits.hold_key)) == -1
    redis_client.delete(limits.hold_key)  # what `sentinel analyzer release` does
    wait_until(lambda: limits.held_for() == 0.0, timeout_s=5, what="the release is seen")
