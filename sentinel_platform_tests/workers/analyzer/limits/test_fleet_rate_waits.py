"""A worker waiting for a slot of the fleet's rate limit, as a real process against the
harness's real HTTP analyzer: SIGTERM ends the wait at once and no call goes out after
it; a long wait is not a hung call (the watchdog leaves it out); and a rate no fleet can
live with is refused at start-up, naming the setting.
"""

from __future__ import annotations

import json
import time
from typing import Any

from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.harness.analyzer_server import AnalyzerServer
from sentinel_platform_tests.harness.processes import Fleet, WorkerProcess, child_env, wait_leases
from sentinel_platform_tests.harness.waits import wait_until
from sentinel_platform_tests.workers.processors.test_transactions import BASE
from workers.analyzer.limits.fleet_limits import analyzer_key_id


def start(
    fleet: Fleet, settings: Settings, client: RedisClient, name: str, **extra: Any
) -> WorkerProcess:
    env = child_env(settings.redis_url_value, settings.home_dir, **extra)
    worker = fleet.worker("transactions", name, env, extra=["--concurrency", "4"])
    wait_leases(client, transaction_keys(settings), [worker], timeout_s=60)
    return worker


def send(client: RedisClient, settings: Settings, count: int) -> None:
    keys = transaction_keys(settings)
    for index in range(count):
        client.xadd(keys.stream, {"data": json.dumps({**BASE, "id": f"paced-{index}"})})


def test_sigterm_during_a_rate_slot_wait_stops_the_worker_at_once_with_no_call_after(
    analyzer_server: AnalyzerServer, fleet: Fleet, settings: Settings, redis_client: RedisClient
) -> None:
    rate = 0.1  # a slot every 10 s: the second call waits 10 s for its turn
    worker = start(
        fleet, settings, redis_client, "paced-stop", analyzer_url=analyzer_server.url,
        analyzer_rate_limit=rate,
    )  # fmt: skip
    send(redis_client, settings, 4)
    rate_key = f"sentinel:analyzer:{analyzer_key_id(analyzer_server.url)}:rate"
    wait_until(lambda: analyzer_server.requests, timeout_s=60, what="the first call")
    wait_until(  # the next slot, 10 s away, is reserved: a call waits for it
        lambda: int(redis_client.pttl(rate_key)) > 15_000,
        timeout_s=30,
        what="a second slot reserved",
    )
    signalled = time.monotonic()
    worker.terminate()
    code = worker.wait(timeout_s=30)
    took = time.monotonic() - signalled
    assert code == 0, worker.tail()
    assert took < 5.0, f"the stop waited {took:.1f}s for a rate slot"
    late = [r for r in analyzer_server.requests if r["at"] > signalled]
    assert late == [], "a call went out after SIGTERM"
    assert len(analyzer_server.requests) == 1


def test_a_long_wait_for_a_rate_slot_is_not_a_hung_call(
    analyzer_server: AnalyzerServer, fleet: Fleet, settings: Settings, redis_client: RedisClient
) -> None:
    # A slot every 6.7 s and a hang timeout of 6 s: the second call waits longer for its
    # turn than a hung call may take, and the worker must go on, not give itself up.
    worker = start(
        fleet, settings, redis_client, "paced-watchdog", analyzer_url=analyzer_server.url,
        analyzer_rate_limit=0.15, hang_timeout_ms=6_000,
    )  # fmt: skip
    send(redis_client, settings, 3)
    keys = transaction_keys(settings)
    wait_until(
        lambda: redis_client.xlen(keys.results) == 3 or not worker.alive(),
        timeout_s=90,
        what="three paced calls answered",
    )
    assert worker.alive(), worker.tail()
    assert worker.events("worker_hung") == []
    arrivals = [request["at"] for request in analyzer_server.requests]
    assert len(arrivals) == 3 and arrivals[1] - arrivals[0] > 6.0, arrivals  # paced indeed
    assert worker.stop() == 0, worker.tail()


def test_a_rate_no_fleet_lives_with_is_refused_at_start_up_naming_the_setting(
    analyzer_server: AnalyzerServer, fleet: Fleet, settings: Settings
) -> None:
    env = child_env(
        settings.redis_url_value,
        settings.home_dir,
        analyzer_url=analyzer_server.url,
        analyzer_rate_limit="1e-9",
    )
    worker = fleet.worker("transactions", "unlivable-rate", env)
    code = worker.wait(timeout_s=60)
    output = worker.text()
    assert code == 2, output
    assert "SENTINEL_ANALYZER_RATE_LIMIT" in output and "one call a minute" in output
    assert "Traceback" not in output
    assert analyzer_server.requests == []
