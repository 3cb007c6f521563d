"""The parts that bound a stop, in this process, against a real server of the test's own:
the budget's deadlines, the stop path's client on a frozen server, the hang watchdog's
give-up on a frozen server, and the work pool's threads outliving any call."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis

from sentinel_platform.streams.consumer.calling.concurrency_limit import FixedLimit
from sentinel_platform.streams.consumer.calling.in_flight import Calls
from sentinel_platform.streams.consumer.loop import Consumer
from sentinel_platform.streams.consumer.outcomes import Delivery, Failure, Outcome, Prepared
from sentinel_platform.streams.consumer.stopping.deadline import (
    FINAL_MARGIN_S,
    STOP_MARGIN_S,
    NoTimeLeftError,
    StopBudget,
    bounded_client,
)
from sentinel_platform_tests.harness.frozen_server import FreezableServer, freezable_server
from sentinel_platform_tests.harness.waits import wait_until

#: Slack for a loaded 2-core machine; far below the 10 s socket timeout of the loop's client.
SLACK_S = 1.5


@pytest.fixture
def own_server(redis_binary: str, tmp_path: Path) -> Iterator[FreezableServer]:
    with freezable_server(redis_binary, tmp_path) as own:
        yield own


@pytest.mark.parametrize(
    ("elapsed", "final", "left"),
    [
        (0.0, False, 5.0),
        (4.0, False, 1.0),
        (6.0, False, 0.0),
        (4.0, True, 1.0 + FINAL_MARGIN_S),
        (5.0 + FINAL_MARGIN_S + 1, True, 0.0),
    ],
)
def test_the_budget_of_a_stop(elapsed: float, final: bool, left: float) -> None:
    budget = StopBudget(5.0, started=100.0)
    assert budget.left(final, now=100.0 + elapsed) == pytest.approx(left)
    assert budget.deadline <= budget.backstop == 100.0 + 5.0 + STOP_MARGIN_S


def test_the_stop_paths_client_gives_up_on_a_frozen_server_by_its_timeout(
    own_server: FreezableServer,
) -> None:
    client = bounded_client(own_server.client, own_server.keys.stream, 0.5)
    assert client.ping()
    own_server.freeze()
    started = time.monotonic()
    with pytest.raises(redis.TimeoutError):
        client.set("k", "v")  # neither retried nor preceded by a health-check PING
    assert time.monotonic() - started < 0.5 + SLACK_S
    client.close()
    with pytest.raises(NoTimeLeftError):
        bounded_client(own_server.client, own_server.keys.stream, 0.0)


def test_the_hang_watchdog_gives_up_within_its_margin_on_a_frozen_server(
    own_server: FreezableServer,
    make_consumer: Callable[..., Consumer],
    events: Callable[[str], list[logging.LogRecord]],
) -> None:
    consumer = make_consumer(redis_url=own_server.url)
    consumer.start()
    own_server.freeze()
    started = time.monotonic()
    consumer.stopping.give_up()  # what the watchdog runs just before it ends the process
    took = time.monotonic() - started
    own_server.thaw()
    assert took < FINAL_MARGIN_S + SLACK_S  # the loop's client: 10 s per try, retried
    assert events("release_failed")  # said so; the lease runs out within one TTL


@pytest.mark.parametrize("raised", [SystemExit(7), KeyboardInterrupt(), ValueError("bug")])
def test_a_call_thread_outlives_a_call_that_raises(raised: BaseException) -> None:
    def call(prepared: Prepared) -> Outcome:
        if prepared.natural_key == "k0":
            raise raised
        time.sleep(0.2)
        return Failure(prepared.delivery, f"done {prepared.natural_key}")

    def aborted(prepared: Prepared, exc: BaseException) -> Outcome:
        return Failure(prepared.delivery, f"failed {prepared.natural_key}: {exc!r}")

    calls = Calls(call, aborted, FixedLimit(2), 2, threading.Event(), lambda *_: None)
    calls.submit([Prepared(Delivery(f"{n}-0", {}, 1), None, f"k{n}") for n in range(5)])
    results: list[Outcome] = []

    def all_back() -> bool:
        results.extend(calls.collect(0.05))
        return len(results) == 5

    wait_until(all_back, 10, what="every call's outcome")
    errors = sorted(r.error for r in results if isinstance(r, Failure))
    assert errors[0] == "done k1" and errors[-1] == f"failed k0: {raised!r}"
    assert errors[1:4] == [f"done k{n}" for n in range(2, 5)]
    threads = [t for t in threading.enumerate() if t.name.startswith("call-")]
    assert len(threads) >= 2 and all(t.is_alive() for t in threads)
    calls.settle_running(time.monotonic())
