"""Waits as the SDKs read them, as users run the workers: ``python -m
workers.watch_transactions`` with ``SENTINEL_ANALYZER_API=openai`` against a real HTTP
server answering as a rate limiter or a gateway does, and a real Redis.

What is promised: a 429 whose ``retry-after-ms`` is 0 (as Azure's are reported to be) is
"no wait given": the fleet backs off (a handful of calls, not a storm) and every verdict
is still the model's once the server serves; a gateway's 408 is retried like the SDKs
retry it, so under ``SENTINEL_ANALYZER_WHEN_DOWN=wait`` no message gets a rules verdict;
and a proxy in front of a dead model, answering nothing but 503 without ``Retry-After``
(Envoy's "no healthy upstream"), is down past the busy bound: under ``rules`` every
message gets a rules verdict and the breaker opens.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from typing import Any

from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.harness.model_api_bodies import RATE_LIMITED
from sentinel_platform_tests.harness.model_api_server import ModelApiServer, Scripted
from sentinel_platform_tests.harness.processes import FAST_TIMINGS, Fleet, WorkerProcess, child_env
from sentinel_platform_tests.harness.waits import wait_until
from sentinel_platform_tests.workers.processors.test_transactions import BASE
from workers.analyzer.answers.busy_spell import BACKOFF_CAP_S, BUSY_BOUND_S

MESSAGES = 6
#: A 429 with no wait, as Azure OpenAI's are reported with (retry-after-ms: 0).
AZURE_429 = Scripted(429, {"retry-after-ms": "0"}, json.dumps(RATE_LIMITED).encode())
#: nginx's 408 (its error page; nginx closes the connection with it).
NGINX_408 = Scripted(
    408,
    {"Server": "nginx", "Connection": "close"},
    b"<html>\r\n<head><title>408 Request Time-out</title></head>\r\n<body>\r\n"
    b"<center><h1>408 Request Time-out</h1></center>\r\n<hr><center>nginx</center>\r\n"
    b"</body>\r\n</html>\r\n",
    "text/html",
)
#: Envoy's local reply when no upstream host is healthy (a crashed model pod).
ENVOY_503 = Scripted(503, {"server": "envoy"}, b"no healthy upstream", "text/plain")


def start(fleet: Fleet, settings: Settings, server: ModelApiServer, **values: Any) -> WorkerProcess:
    env = child_env(
        settings.redis_url_value,
        settings.home_dir,
        analyzer_api="openai",
        analyzer_url=server.url,
        analyzer_model="gpt-4o-mini",
        **values,
    )
    env.update(FAST_TIMINGS)
    command = [sys.executable, "-m", "workers.watch_transactions", "--consumer", "waits"]
    child = fleet.spawn("waits", command, env)
    return WorkerProcess(child.proc, child.name, None, child.log_path, env, "transactions")


def for_seconds(seconds: float, answer: Scripted) -> Callable[[int], Scripted | None]:
    """``answer`` to every call until ``seconds`` after the first, then serve."""
    first: list[float] = []

    def script(number: int) -> Scripted | None:
        now = time.monotonic()
        if not first:
            first.append(now)
        return answer if now - first[0] < seconds else None

    return script


def verdicts(
    worker: WorkerProcess, settings: Settings, redis_client: RedisClient, timeout_s: float
) -> list[Any]:
    """Add the messages, wait for every verdict, return them (entry id, fields)."""
    worker.wait_ready(redis_client, timeout_s=60)
    keys = transaction_keys(settings)
    for i in range(MESSAGES):
        redis_client.xadd(keys.stream, {"data": json.dumps({**BASE, "id": f"t-{i}"})})
    wait_until(
        lambda: redis_client.xlen(keys.results) == MESSAGES,
        timeout_s=timeout_s,
        what="every verdict",
    )
    return list(redis_client.xrange(keys.results) or [])


def statuses(server: ModelApiServer) -> list[int]:
    return [request.get("status", 0) for request in server.seen()]


def test_a_429_with_a_wait_of_zero_backs_the_fleet_off_and_every_verdict_is_the_models(
    model_api_server: ModelApiServer, fleet: Fleet, settings: Settings, redis_client: RedisClient
) -> None:
    model_api_server.script = for_seconds(2.5, AZURE_429)
    worker = start(fleet, settings, model_api_server)
    results = verdicts(worker, settings, redis_client, timeout_s=60)
    assert [fields["driver_used"] for _, fields in results] == ["analyzer"] * MESSAGES
    answered = statuses(model_api_server)
    # Backing off 0.5, 1, 2 s (less jitter) covers 2.5 s in 3 to 4 refusals; read as
    # "call again now" it made hundreds.
    assert 1 <= answered.count(429) <= 8, answered
    assert answered.count(200) == MESSAGES
    assert worker.stop() == 0, worker.tail()


def test_a_gateways_408s_are_retried_not_given_rules_verdicts_when_waiting_for_the_model(
    model_api_server: ModelApiServer, fleet: Fleet, settings: Settings, redis_client: RedisClient
) -> None:
    model_api_server.script = for_seconds(1.5, NGINX_408)
    worker = start(fleet, settings, model_api_server, analyzer_when_down="wait")
    results = verdicts(worker, settings, redis_client, timeout_s=60)
    assert [fields["driver_used"] for _, fields in results] == ["analyzer"] * MESSAGES
    answered = statuses(model_api_server)
    assert answered.count(408) >= 1 and answered.count(200) == MESSAGES, answered
    assert worker.stop() == 0, worker.tail()


def test_nothing_but_503_from_a_proxy_is_down_past_the_busy_bound_and_the_rules_decide(
    model_api_server: ModelApiServer, fleet: Fleet, settings: Settings, redis_client: RedisClient
) -> None:
    model_api_server.script = lambda number: ENVOY_503
    failures = 3
    worker = start(
        fleet,
        settings,
        model_api_server,
        analyzer_when_down="rules",
        analyzer_breaker_failures=failures,
        analyzer_breaker_cooldown_s=600,
    )
    # The bound, then at most one backoff before the answer that finds it passed, then
    # each message's call (a few breaker failures, the rest refused at once).
    results = verdicts(worker, settings, redis_client, BUSY_BOUND_S + BACKOFF_CAP_S + 20)
    assert [fields["driver_used"] for _, fields in results] == ["fallback"] * MESSAGES
    first_call = model_api_server.seen()[0]["at"]
    first_verdict = int(results[0][0].split("-")[0]) / 1000
    assert first_verdict - first_call >= BUSY_BOUND_S - 0.5, "busy first, down past the bound"
    assert set(statuses(model_api_server)) == {503}
    opened = [e for e in worker.events("analyzer_circuit") if e["state"] == "open"]
    assert len(opened) == 1 and f"{failures} consecutive failures" in opened[0]["reason"]
    assert "nothing but busy answers" in opened[0]["reason"]
    assert worker.stop() == 0, worker.tail()
