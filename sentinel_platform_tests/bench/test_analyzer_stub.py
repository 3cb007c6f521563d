"""The harness's analyzer of capacity K (:mod:`sentinel_platform_tests.harness.analyzer_stub`),
driven by real HTTP requests (urllib3, one connection per client, as the worker's pool).

Tests and benchmarks read their figures from it ("K was never exceeded", "calls = 24"),
so each of its promises is checked here: K is never exceeded, a request beyond K gets 429
with ``Retry-After`` at once (reject) or waits its turn and the wait is measured (queue),
a change of K at run time takes effect, the random 429s are drawn, and assessments are
counted per key. Latencies are long enough to tell "served together" from "served in turn"
on a loaded machine, and every wait has a deadline.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import pytest
import urllib3

from sentinel_platform_tests.harness.analyzer_stub import AnalyzerStub
from sentinel_platform_tests.harness.waits import wait_until
from workers.analyzer import parse_assessment

TIMEOUT_S = 30.0


@dataclass(frozen=True)
class Answer:
    status: int
    retry_after: str | None
    seconds: float


@pytest.fixture
def http() -> Iterator[urllib3.PoolManager]:
    pool = urllib3.PoolManager(maxsize=64, block=False, retries=False, timeout=TIMEOUT_S)
    yield pool
    pool.clear()


def post(http: urllib3.PoolManager, url: str, key: str = "t1") -> Answer:
    """One analyzer request as the worker sends it; an assessment must parse."""
    body = json.dumps({"kind": "transaction", "payload": {"id": key}}).encode()
    started = time.monotonic()
    response = http.request("POST", url, body=body, headers={"Content-Type": "application/json"})
    seconds = time.monotonic() - started
    if response.status == 200:
        parse_assessment(response.data)
    return Answer(response.status, response.headers.get("Retry-After"), seconds)


def post_at_once(
    http: urllib3.PoolManager, url: str, count: int, keys: list[str] | None = None
) -> list[Answer]:
    """``count`` requests released together by a barrier; their answers in order."""
    barrier = threading.Barrier(count)

    def one(index: int) -> Answer:
        barrier.wait(TIMEOUT_S)
        return post(http, url, keys[index] if keys else f"t{index}")

    with ThreadPoolExecutor(count) as pool:
        return list(pool.map(one, range(count)))


def test_reject_mode_serves_k_at_once_and_answers_429_with_retry_after_beyond(
    http: urllib3.PoolManager,
) -> None:
    latency = 1.0
    with AnalyzerStub(latency, capacity=4, mode="reject", retry_after="3") as stub:
        answers = post_at_once(http, stub.url, 12)
        counters = wait_until(lambda: (c := stub.counters())["in_flight"] == 0 and c, 10)
    served = [a for a in answers if a.status == 200]
    refused = [a for a in answers if a.status == 429]
    assert (len(served), len(refused)) == (4, 8)
    assert {a.retry_after for a in refused} == {"3"}
    # A refusal is immediate, not after a latency: that is what makes it a refusal.
    assert all(a.seconds < latency / 2 for a in refused), [a.seconds for a in refused]
    assert all(a.seconds >= latency for a in served)
    assert counters["peak_serving"] == 4
    assert counters["peak_in_flight"] >= 5
    assert (counters["calls"], counters["answered"], counters["rejected"]) == (12, 4, 8)


def test_clients_at_exactly_k_calling_back_to_back_are_never_refused(
    http: urllib3.PoolManager,
) -> None:
    """K clients that each send their next request the moment they have an answer: the
    place is free by then, as at a real service, so a worker whose limit has found K is
    never refused for its own previous call."""
    capacity, rounds = 4, 100

    def client(index: int) -> list[int]:
        return [post(http, stub.url, f"c{index}-{n}").status for n in range(rounds)]

    with AnalyzerStub(0.0, capacity=capacity, mode="reject") as stub:
        with ThreadPoolExecutor(capacity) as pool:
            statuses = [s for result in pool.map(client, range(capacity)) for s in result]
        counters = stub.counters()
    assert statuses.count(429) == 0 and counters["rejected"] == 0
    assert counters["answered"] == capacity * rounds == sum(stub.calls_per_key().values())


def test_queue_mode_serves_k_at_once_in_turn_and_measures_the_wait(
    http: urllib3.PoolManager,
) -> None:
    """K = 2, six at once, 0.5 s each: three rounds; the waits are 0, 0, L, L, 2L, 2L,
    so the mean wait over the six is L."""
    latency = 0.5
    with AnalyzerStub(latency, capacity=2, mode="queue") as stub:
        started = time.monotonic()
        answers = post_at_once(http, stub.url, 6)
        elapsed = time.monotonic() - started
        counters = wait_until(lambda: (c := stub.counters())["in_flight"] == 0 and c, 10)
    assert [a.status for a in answers] == [200] * 6
    assert 3 * latency <= elapsed < 3 * latency + 2.0
    assert counters["peak_serving"] == 2 and counters["peak_in_flight"] == 6
    assert (counters["served_calls"], counters["queued_calls"]) == (6, 4)
    assert counters["rejected"] == 0 and counters["answered"] == 6
    assert 0.8 * latency <= counters["queue_wait_mean_s"] <= 1.6 * latency


def test_no_capacity_serves_everything_at_once(http: urllib3.PoolManager) -> None:
    with AnalyzerStub(0.5) as stub:
        started = time.monotonic()
        answers = post_at_once(http, stub.url, 8)
        elapsed = time.monotonic() - started
        counters = wait_until(lambda: (c := stub.counters())["in_flight"] == 0 and c, 10)
    assert [a.status for a in answers] == [200] * 8
    assert elapsed < 1.5  # together, not 8 x 0.5 s in turn
    assert counters["peak_serving"] == 8 and counters["queue_wait_mean_s"] == 0.0


def test_capacity_raised_at_run_time_admits_the_queued_at_once(
    http: urllib3.PoolManager,
) -> None:
    """K = 1 with four requests present: one served, three queued; raising K to 4 lets
    the three start at once, so all end in about two latencies instead of four."""
    latency = 1.0
    with AnalyzerStub(latency, capacity=1, mode="queue") as stub, ThreadPoolExecutor(4) as pool:
        started = time.monotonic()
        futures: list[Future[Answer]] = [
            pool.submit(post, http, stub.url, f"t{i}") for i in range(4)
        ]
        wait_until(lambda: stub.counters()["in_flight"] == 4, 10, what="four requests present")
        assert stub.counters()["peak_serving"] == 1
        stub.set_capacity(4)
        answers = [f.result(TIMEOUT_S) for f in futures]
        elapsed = time.monotonic() - started
        counters = stub.counters()
    assert [a.status for a in answers] == [200] * 4
    assert elapsed < 3 * latency, f"{elapsed:.2f} s: the raise did not admit the queue"
    assert counters["peak_serving"] == 4 and stub.capacity == 4


def test_capacity_cut_at_run_time_refuses_beyond_the_new_k(http: urllib3.PoolManager) -> None:
    """A capacity cut mid-run (32 to 4 in the benchmark), in small: six are being served
    when K drops from 8 to 2; those finish, and a new request is refused meanwhile."""
    latency = 1.0
    with AnalyzerStub(latency, capacity=8, mode="reject") as stub, ThreadPoolExecutor(6) as pool:
        futures = [pool.submit(post, http, stub.url, f"t{i}") for i in range(6)]
        wait_until(lambda: stub.counters()["in_flight"] == 6, 10, what="six being served")
        stub.set_capacity(2)
        refused = post(http, stub.url, "late")
        earlier = [f.result(TIMEOUT_S) for f in futures]
        after = [post(http, stub.url, f"after{i}") for i in range(2)]
        counters = stub.counters()
    assert refused.status == 429 and refused.retry_after == "1"
    assert [a.status for a in earlier] == [200] * 6  # a cut never interrupts a call
    assert [a.status for a in after] == [200, 200]
    assert counters["peak_serving"] == 6 and counters["rejected"] == 1


def test_capacity_cut_in_queue_mode_holds_arrivals_until_below_the_new_k(
    http: urllib3.PoolManager,
) -> None:
    latency = 1.0
    with AnalyzerStub(latency, capacity=4, mode="queue") as stub, ThreadPoolExecutor(5) as pool:
        first = [pool.submit(post, http, stub.url, f"t{i}") for i in range(4)]
        wait_until(lambda: stub.counters()["in_flight"] == 4, 10, what="four being served")
        stub.set_capacity(1)
        late = pool.submit(post, http, stub.url, "late")
        wait_until(lambda: stub.counters()["queued_calls"] == 1, 10, what="the late one queued")
        answers = [f.result(TIMEOUT_S) for f in [*first, late]]
        counters = stub.counters()
    assert [a.status for a in answers] == [200] * 5
    assert answers[-1].seconds >= 2 * latency * 0.9  # waited for the four, then its own
    assert counters["peak_serving"] == 4


def test_reject_fraction_answers_429_regardless_of_load(http: urllib3.PoolManager) -> None:
    with AnalyzerStub(0.0, reject_fraction=0.5, seed=7, retry_after="2") as stub:
        answers = [post(http, stub.url, f"t{i}") for i in range(60)]
        counters = stub.counters()
    refused = [a for a in answers if a.status == 429]
    assert 15 <= len(refused) <= 45
    assert {a.retry_after for a in refused} == {"2"}
    assert counters["rejected"] == len(refused)
    assert counters["answered"] == 60 - len(refused)
    assert counters["peak_in_flight"] == 1  # sequential: never at capacity


def test_calls_are_counted_per_key_and_refusals_are_not(http: urllib3.PoolManager) -> None:
    """24 keys x 3 copies: 72 assessments, three per key; a 429 is no assessment."""
    keys = [f"txn-{i}" for i in range(24)] * 3
    with AnalyzerStub(0.05, capacity=100, mode="queue") as stub:
        answers = post_at_once(http, stub.url, len(keys), keys)
        stub.set_capacity(1)
        stub.reject_fraction = 1.0
        refused = post(http, stub.url, "txn-0")
        per_key = stub.calls_per_key()
    assert all(a.status == 200 for a in answers) and refused.status == 429
    assert len(per_key) == 24 and set(per_key.values()) == {3}


def test_stop_ends_held_and_queued_requests_at_once(http: urllib3.PoolManager) -> None:
    """A stub holding a request for a minute and queueing another stops in well under it."""
    stub = AnalyzerStub(60.0, capacity=1, mode="queue").start()
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(post, http, stub.url, f"t{i}") for i in range(2)]
        wait_until(lambda: stub.counters()["queued_calls"] == 1, 10, what="one queued")
        started = time.monotonic()
        stub.stop()
        for future in futures:
            with pytest.raises(urllib3.exceptions.HTTPError):
                future.result(TIMEOUT_S)
        assert time.monotonic() - started < 5.0


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"capacity": 0}, "capacity"),
        ({"mode": "drop"}, "mode"),
        ({"reject_fraction": 1.5}, "reject_fraction"),
    ],
)
def test_bad_arguments_are_refused(kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        AnalyzerStub(0.1, **kwargs)  # type: ignore[arg-type]
