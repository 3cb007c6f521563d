"""A stop is bounded whatever Redis does: SIGTERM to a worker whose server is frozen.

The server is a process of the test's own, frozen with SIGSTOP: it accepts connections
and never answers, like a stalled VM. A worker told to stop then must exit within
``SENTINEL_SHUTDOWN_TIMEOUT_S`` + ``STOP_MARGIN_S`` (at most 5 s past the timeout), with
:data:`EXIT_UNCOMMITTED` since it could not release its lease nor settle what it held.
Once the server answers again its messages are recovered by a survivor (the lease runs
out), each applied once: nothing is lost.

It used to stay up for minutes: the shutdown's Redis calls went through the loop's
client, with its retries, health-check PINGs and socket timeouts of 10 s or more.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sentinel_platform.exit_codes import EXIT_UNCOMMITTED
from sentinel_platform.streams.consumer.group import ensure_group
from sentinel_platform.streams.consumer.stopping.deadline import STOP_MARGIN_S
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.frozen_server import FreezableServer, freezable_server
from sentinel_platform_tests.harness.processes import StartWorker, WorkerProcess
from sentinel_platform_tests.harness.processors import PEAK_KEY
from sentinel_platform_tests.harness.streams import publish
from sentinel_platform_tests.harness.waits import wait_until

SHUTDOWN_TIMEOUT_S = 5.0
#: The most a stop may ever take (timeout + 5 s); the documented bound is tighter.
REQUIRED_S = SHUTDOWN_TIMEOUT_S + 5.0
C = 4


@pytest.fixture
def own_server(redis_binary: str, tmp_path: Path) -> Iterator[FreezableServer]:
    with freezable_server(redis_binary, tmp_path) as own:
        yield own


def _effects(client: RedisClient, keys: StreamKeys) -> dict[str, int]:
    counts: dict[str, int] = {}
    for _id, fields in client.xrange(keys.results):
        counts[fields["key"]] = counts.get(fields["key"], 0) + 1
    return counts


def _settled(client: RedisClient, keys: StreamKeys, expected: int) -> bool:
    return (
        client.xlen(keys.results) >= expected
        and client.xpending(keys.stream, keys.group)["pending"] == 0
    )


def _stop_frozen(own: FreezableServer, worker: WorkerProcess) -> float:
    """Freeze the server, SIGTERM the worker, wait for its exit; seconds it took."""
    own.freeze()
    worker.terminate()
    asked = time.monotonic()
    status = worker.wait(REQUIRED_S + 20)  # a worker that hangs fails below, not here
    took = time.monotonic() - asked
    assert took < REQUIRED_S, f"stopped after {took:.1f} s:\n{worker.tail(30)}"
    assert status == EXIT_UNCOMMITTED, worker.tail(30)
    # It said why: its stop outran the bound, or it stopped with work left undone.
    said = worker.events("stop_overran") or [e for e in worker.events("stopped") if e["undone"]]
    assert said, worker.tail(30)
    return took


def test_sigterm_with_slow_calls_in_flight_on_a_frozen_server_exits_in_bound_and_loses_nothing(
    own_server: FreezableServer, start_worker: StartWorker
) -> None:
    client, keys = own_server.client, own_server.keys
    ensure_group(client, keys)
    env = {"REDIS_URL": own_server.url, "SENTINEL_SHUTDOWN_TIMEOUT_S": str(SHUTDOWN_TIMEOUT_S)}
    messages = [{"key": f"slow{n}", "sleep_ms": "4000"} for n in range(C + 2)]
    worker = start_worker(env=env, args=["--concurrency", str(C)]).wait_ready(client)
    publish(client, keys, messages)
    wait_until(lambda: int(client.get(PEAK_KEY) or 0) == C, 20, what="C calls in flight")

    took = _stop_frozen(own_server, worker)
    assert took < SHUTDOWN_TIMEOUT_S + STOP_MARGIN_S + 1.5  # the documented bound, + exit

    own_server.thaw()
    start_worker(env=env, args=["--concurrency", str(C)]).wait_ready(client)
    wait_until(lambda: _settled(client, keys, len(messages)), 60, what="all recovered")
    assert _effects(client, keys) == {m["key"]: 1 for m in messages}


def test_sigterm_to_an_idle_worker_on_a_frozen_server_exits_in_bound_and_loses_nothing(
    own_server: FreezableServer, start_worker: StartWorker
) -> None:
    client, keys = own_server.client, own_server.keys
    ensure_group(client, keys)
    env = {"REDIS_URL": own_server.url, "SENTINEL_SHUTDOWN_TIMEOUT_S": str(SHUTDOWN_TIMEOUT_S)}
    worker = start_worker(env=env).wait_ready(client)
    before = [{"key": f"before{n}"} for n in range(5)]
    publish(client, keys, before)
    wait_until(lambda: _settled(client, keys, len(before)), 20, what="first batch")

    took = _stop_frozen(own_server, worker)
    assert took < SHUTDOWN_TIMEOUT_S + STOP_MARGIN_S + 1.5  # the documented bound, + exit

    own_server.thaw()
    after = [{"key": f"after{n}"} for n in range(5)]
    publish(client, keys, after)
    start_worker(env=env).wait_ready(client)
    wait_until(lambda: _settled(client, keys, len(before) + len(after)), 30, what="recovered")
    assert _effects(client, keys) == {m["key"]: 1 for m in [*before, *after]}
