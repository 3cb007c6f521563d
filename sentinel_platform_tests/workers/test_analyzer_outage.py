"""A worker on the adaptive limit through an analyzer outage or a collapse of its capacity.

A real ``python -m sentinel_platform.workers transactions`` process against the harness's
real HTTP analyzer (100 ms answers) and a real Redis, with a backlog kept full. During an
outage (HTTP 500) the rules decide in a millisecond; those fallbacks are not latency
samples (``Effect.sample``), so a worker (re)started during the outage does not learn a
no-load latency of 2 ms from them and, once the analyzer answers again, does not read
its real 100 ms as a queue. The promise is measured against a control, not a clock:
the same worker started with the analyzer up, in the same window after its first answer.
With ``SENTINEL_ANALYZER_WHEN_DOWN=wait`` the messages wait through the outage instead,
and that wait does not cut the limit either (``AnalyzerWaiting``).

When the analyzer refuses every call (429) the limit collapses to 1 while the messages
read before wait parked in the worker's hand: the holding it publishes (what the fleet's
zones count as work in hand, not pressure) is never below what is pending on it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.holdings import read_holdings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, transaction_keys
from sentinel_platform_tests.harness.analyzer_server import AnalyzerServer
from sentinel_platform_tests.harness.processes import Fleet, WorkerProcess, child_env, wait_leases
from sentinel_platform_tests.harness.streams import pending_of
from sentinel_platform_tests.harness.waits import wait_until
from sentinel_platform_tests.workers.processors.test_transactions import BASE
from sentinel_platform_tests.workers.test_analyzer_in_worker import scrape_samples

#: The analyzer's answer time, and the limit's ceiling (kept small: a shared machine).
LATENCY_S = 0.1
CONCURRENCY_MAX = 16
#: The outage: its least length, and the messages the restarted worker decides in it.
OUTAGE_S = 4.0
FALLBACKS_IN_OUTAGE = 50
#: The window after the analyzer's first answer in which the rates are compared.
WINDOW = (2.0, 4.0)
#: The window of waiting messages: called once the analyzer answers, not a backoff later.
AT_ONCE = (0.5, 2.0)
#: Messages added whenever fewer than this many are waiting: the worker never runs dry.
TOP_UP = 1000


@dataclass
class Backlog:
    """Keeps at least :data:`TOP_UP` transactions waiting on the stream."""

    client: RedisClient
    keys: StreamKeys
    added: int = 0

    def top_up(self) -> None:
        if self.added - self.client.xlen(self.keys.results) >= TOP_UP:
            return
        pipe = self.client.pipeline(transaction=False)
        for index in range(self.added, self.added + TOP_UP):
            pipe.xadd(self.keys.stream, {"data": json.dumps({**BASE, "id": f"o-{index}"})})
        pipe.execute()
        self.added += TOP_UP

    def wait(self, condition: Callable[[], Any], timeout_s: float, what: str) -> Any:
        """:func:`wait_until` ``condition``, topping up between polls."""

        def topped_up() -> Any:
            self.top_up()
            return condition()

        return wait_until(topped_up, timeout_s, interval_s=0.05, what=what)


def answered_after(server: AnalyzerServer, since: float) -> float:
    """When the first request after ``since`` reached the analyzer (it answers all)."""
    return next(r["at"] for r in list(server.requests) if r["at"] >= since)


def rate_in(server: AnalyzerServer, start: float, window: tuple[float, float] = WINDOW) -> float:
    """Requests per second the analyzer got in ``window`` after ``start``."""
    low, high = start + window[0], start + window[1]
    count = sum(1 for r in list(server.requests) if low <= r["at"] < high)
    return count / (window[1] - window[0])


def rate_after_next_answer(
    server: AnalyzerServer, backlog: Backlog, since: float, window: tuple[float, float] = WINDOW
) -> float:
    """The analyzer's rate in ``window`` after its first request from ``since`` on, the
    backlog kept full until the window ends."""
    backlog.wait(lambda: any(r["at"] >= since for r in server.requests), 30, "a call")
    start = answered_after(server, since)
    backlog.wait(lambda: time.monotonic() > start + window[1], 30, "the window's end")
    return rate_in(server, start, window)


def fallbacks(client: RedisClient, keys: StreamKeys) -> int:
    return sum(1 for _, f in client.xrange(keys.results) if f["driver_used"] == "fallback")


def test_a_worker_restarted_in_an_outage_is_back_to_its_rate_within_two_seconds(
    analyzer_server: AnalyzerServer,
    fleet: Fleet,
    settings: Settings,
    redis_client: RedisClient,
) -> None:
    analyzer_server.mode, analyzer_server.delay_s = "slow", LATENCY_S
    keys = transaction_keys(settings)
    env = child_env(
        settings.redis_url_value,
        settings.home_dir,
        analyzer_url=analyzer_server.url,
        analyzer_breaker_cooldown_s=0.5,
        worker_concurrency_max=CONCURRENCY_MAX,
    )
    backlog = Backlog(redis_client, keys)
    backlog.top_up()

    # The control: a worker started with the analyzer up, 2-4 s after its first answer.
    control = fleet.worker("transactions", "outage-control", env)
    wait_leases(redis_client, keys, [control])
    control_rate = rate_after_next_answer(analyzer_server, backlog, 0.0)

    # The outage; the worker is restarted in it and decides by the rules for a while.
    analyzer_server.mode = "error"
    outage_start = time.monotonic()
    assert control.stop() == 0, control.tail()
    worker: WorkerProcess = fleet.worker("transactions", "outage-restarted", env)
    wait_leases(redis_client, keys, [worker])
    before = fallbacks(redis_client, keys)
    backlog.wait(
        lambda: (
            time.monotonic() - outage_start >= OUTAGE_S
            and fallbacks(redis_client, keys) - before >= FALLBACKS_IN_OUTAGE
        ),
        60,
        "the restarted worker's fallbacks through the outage",
    )

    # The analyzer answers again: the restarted worker's rate in the same window.
    back = time.monotonic()
    analyzer_server.mode = "slow"
    recovered_rate = rate_after_next_answer(analyzer_server, backlog, back)
    assert worker.stop() == 0, worker.tail()

    assert control_rate >= 3 / LATENCY_S, f"the control runs several calls: {control_rate}/s"
    assert recovered_rate >= control_rate / 2, (
        f"{recovered_rate:.0f} calls/s 2-4 s after the analyzer answered again, "
        f"against {control_rate:.0f}/s for the same worker started with it up"
    )


def test_in_wait_mode_a_worker_is_back_to_its_rate_within_two_seconds_of_an_outage(
    analyzer_server: AnalyzerServer,
    fleet: Fleet,
    settings: Settings,
    redis_client: RedisClient,
) -> None:
    """``SENTINEL_ANALYZER_WHEN_DOWN=wait``: through the outage every message waits (a
    5xx, the open breaker); none of that is the analyzer saying "too many", so the limit
    is not cut for it and is where it was when the analyzer answers again. The waiting
    messages are called as soon as a call is answered, not at the end of a backoff that
    doubled through the outage to 5 s (``Calls`` wakes them): measured from 0.5 s on."""
    analyzer_server.mode, analyzer_server.delay_s = "slow", LATENCY_S
    keys = transaction_keys(settings)
    env = child_env(
        settings.redis_url_value,
        settings.home_dir,
        analyzer_url=analyzer_server.url,
        analyzer_when_down="wait",
        analyzer_breaker_cooldown_s=0.5,
        worker_concurrency_max=CONCURRENCY_MAX,
    )
    backlog = Backlog(redis_client, keys)
    backlog.top_up()
    worker = fleet.worker("transactions", "outage-waiting", env)
    wait_leases(redis_client, keys, [worker])
    control_rate = rate_after_next_answer(analyzer_server, backlog, 0.0)

    analyzer_server.mode = "error"
    outage_start = time.monotonic()
    backlog.wait(lambda: time.monotonic() - outage_start >= OUTAGE_S, 30, "the outage")
    failed = sum(1 for r in list(analyzer_server.requests) if r["at"] >= outage_start)
    back = time.monotonic()
    analyzer_server.mode = "slow"
    recovered_rate = rate_after_next_answer(analyzer_server, backlog, back, AT_ONCE)
    assert worker.stop() == 0, worker.tail()

    assert failed >= 5, f"the outage met the worker's calls ({failed})"
    assert redis_client.xlen(keys.dlq) == 0
    assert {f["driver_used"] for _, f in redis_client.xrange(keys.results)} == {"analyzer"}
    assert control_rate >= 3 / LATENCY_S, f"the control runs several calls: {control_rate}/s"
    assert recovered_rate >= control_rate / 2, (
        f"{recovered_rate:.0f} calls/s {AT_ONCE[0]}-{AT_ONCE[1]} s after the analyzer "
        f"answered again, against {control_rate:.0f}/s before the outage"
    )


def test_after_its_limit_collapses_a_worker_publishes_at_least_what_it_holds(
    analyzer_server: AnalyzerServer,
    fleet: Fleet,
    settings: Settings,
    redis_client: RedisClient,
) -> None:
    analyzer_server.mode, analyzer_server.delay_s = "slow", LATENCY_S
    keys = transaction_keys(settings)
    env = child_env(
        settings.redis_url_value,
        settings.home_dir,
        analyzer_url=analyzer_server.url,
        worker_concurrency_max=CONCURRENCY_MAX,
    )
    backlog = Backlog(redis_client, keys)
    backlog.top_up()
    worker = fleet.worker("transactions", "collapsing", env, extra=["--metrics-port", "0"])
    wait_leases(redis_client, keys, [worker])
    (serving,) = worker.events("metrics_serving")

    def limit() -> float:
        (value,) = [
            v
            for k, v in scrape_samples(serving["url"]).items()
            if k.startswith("sentinel_worker_in_flight_limit")
        ]
        return value

    backlog.wait(lambda: limit() >= 12, 30, "the limit grown past its start")
    # Every call refused, with no Retry-After: each refusal is a drop, one burst of them.
    analyzer_server.mode = "rate_limited"
    wait_until(lambda: limit() <= 2, 30, interval_s=0.05, what="the limit collapsed")

    def covered() -> tuple[int, int] | None:
        published = read_holdings(redis_client, keys).by_consumer.get(worker.consumer, 0)
        pending = pending_of(redis_client, keys, worker.consumer)
        return (published, pending) if published >= pending > limit() else None

    published, pending = wait_until(
        covered, 10, interval_s=0.05, what="a holding that covers the messages pending on it"
    )
    assert pending > 2, f"{pending} read before the collapse wait in its hand ({published})"
    assert worker.stop() == 0, worker.tail()
