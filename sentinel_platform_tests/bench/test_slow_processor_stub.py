"""The analyzer stub of the slow-processor and analyzer-limits benches: it must serve
requests concurrently and count the peak in flight, or the bench would measure the stub
instead of the worker.

Eight clients post at once to a stub answering after 0.5 s: all eight are answered with a
reply the real client accepts, together in about one latency (a serial server would take
eight), and the stub saw all eight in flight at once. A hanging stub answers nothing.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import pytest

from sentinel_platform_tests.harness.analyzer_stub import AnalyzerStub
from sentinel_platform_tests.harness.waits import wait_until
from workers.analyzer import Assessment, parse_assessment

LATENCY_S = 0.5
CLIENTS = 8


def _post(url: str, timeout_s: float = 10.0) -> Assessment:
    body = json.dumps({"kind": "transaction", "payload": {"id": "t1"}}).encode()
    request = urllib.request.Request(
        url, data=body, headers={"Content-Type": "application/json"}, method="POST"
    )
    with urllib.request.urlopen(request, timeout=timeout_s) as response:
        return parse_assessment(response.read())


def test_stub_answers_concurrent_requests_after_its_latency_and_counts_the_peak() -> None:
    with AnalyzerStub(LATENCY_S) as stub, ThreadPoolExecutor(CLIENTS) as pool:
        started = time.monotonic()
        replies = list(pool.map(lambda _: _post(stub.url), range(CLIENTS)))
        elapsed = time.monotonic() - started
        # A client has its reply once the stub flushed it, a moment before the stub's
        # handler counts it as answered: wait for the count, with a deadline.
        counters = wait_until(
            lambda: (c := stub.counters())["answered"] >= CLIENTS and c, 5, what="answered"
        )
    assert len(replies) == CLIENTS
    assert LATENCY_S <= elapsed < 3 * LATENCY_S, f"{CLIENTS} requests took {elapsed:.2f} s"
    assert counters["calls"] == counters["answered"] == CLIENTS
    assert counters["peak_in_flight"] == CLIENTS
    assert counters["connections"] == CLIENTS


def test_hanging_stub_answers_nothing_within_the_client_timeout() -> None:
    with AnalyzerStub(2.0, hang=True) as stub:
        with pytest.raises((TimeoutError, urllib.error.URLError)):
            _post(stub.url, timeout_s=0.2)
        counters = stub.counters()
    assert (counters["calls"], counters["answered"]) == (1, 0)
