"""A worker on the adaptive limit through an analyzer outage: its limit comes back.

A real ``python -m sentinel_platform.workers transactions`` process against the harness's
real HTTP analyzer (100 ms answers) and a real Redis, with a backlog kept full. During an
outage (HTTP 500) the rules decide in a millisecond; those fallbacks are not latency
samples (``Effect.sample``), so a worker (re)started during the outage does not learn a
no-load latency of 2 ms from them and, once the analyzer answers again, does not read
its real 100 ms as a queue. The promise is measured against a control, not a clock:
the same worker started with the analyzer up, in the same window after its first answer.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, transaction_keys
from sentinel_platform_tests.harness.analyzer_server import AnalyzerServer
from sentinel_platform_tests.harness.processes import Fleet, WorkerProcess, child_env, wait_leases
from sentinel_platform_tests.harness.waits import wait_until
from sentinel_platform_tests.workers.processors.test_transactions import BASE

#: The analyzer's answer time, and the limit's ceiling (kept small: a shared machine).
LATENCY_S = 0.1
CONCURRENCY_MAX = 16
#: The outage: its least length, and the messages the restarted worker decides in it.
OUTAGE_S = 4.0
FALLBACKS_IN_OUTAGE = 50
#: The window after the analyzer's first answer in which the rates are compared.
WINDOW = (2.0, 4.0)
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


def rate_in(server: AnalyzerServer, start: float) -> float:
    """Requests per second the analyzer got in :data:`WINDOW` after ``start``."""
    low, high = start + WINDOW[0], start + WINDOW[1]
    count = sum(1 for r in list(server.requests) if low <= r["at"] < high)
    return count / (WINDOW[1] - WINDOW[0])


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

    def run_until_window_ends(start: float, what: str) -> None:
        backlog.wait(lambda: time.monotonic() > start + WINDOW[1], 30, what)

    # The control: a worker started with the analyzer up, 2-4 s after its first answer.
    started = time.monotonic()
    control = fleet.worker("transactions", "outage-control", env)
    wait_leases(redis_client, keys, [control])
    first = backlog.wait(lambda: analyzer_server.requests, 30, "the control's first call")
    control_start = first[0]["at"]
    assert control_start >= started
    run_until_window_ends(control_start, "the control's window")
    control_rate = rate_in(analyzer_server, control_start)

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
    backlog.wait(lambda: any(r["at"] >= back for r in analyzer_server.requests), 30, "a call")
    answering = answered_after(analyzer_server, back)
    run_until_window_ends(answering, "the restarted worker's window")
    recovered_rate = rate_in(analyzer_server, answering)
    assert worker.stop() == 0, worker.tail()

    assert control_rate >= 3 / LATENCY_S, f"the control runs several calls: {control_rate}/s"
    assert recovered_rate >= control_rate / 2, (
        f"{recovered_rate:.0f} calls/s 2-4 s after the analyzer answered again, "
        f"against {control_rate:.0f}/s for the same worker started with it up"
    )
