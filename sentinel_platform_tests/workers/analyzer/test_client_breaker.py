"""The analyzer client under load and under failure, over real sockets.

What is promised: after ``SENTINEL_ANALYZER_BREAKER_FAILURES`` consecutive failures the
breaker opens and every call fails in milliseconds (the rules decide) instead of waiting
for the timeout; after the cool-down exactly one probe reaches the analyzer and its
success closes the breaker (a busy analyzer, 429 or 503 with ``Retry-After``, never
opens it: ``test_client_busy.py``); and however many threads share one client, the
analyzer never sees more connections or requests at once than
``SENTINEL_WORKER_CONCURRENCY``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sentinel_platform.settings import Settings
from sentinel_platform.streams.consumer.metrics import Metrics
from sentinel_platform_tests.harness.analyzer_server import (
    AnalyzerServer,
    refusing_url,
    wait_for_monotonic,
)
from sentinel_platform_tests.workers.processors.test_transactions import make_txn
from workers.analyzer import AnalyzerError, HttpAnalyzer, analyzer_from_settings
from workers.analyzer.breaker import CircuitBreaker
from workers.processors import TransactionProcessor

PASSWORD = "Br34k3r-Pw"
#: What "fails at once" means: generous for a loaded CI machine, yet below the shortest
#: timeout a call could otherwise wait for (0.3 s, in the fail-fast test).
FAST_S = 0.2


@pytest.fixture
def metrics() -> Iterator[Metrics]:
    instance = Metrics(labels={"stream": "transactions"})
    yield instance
    instance.close()


def circuit_events(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [
        {k: getattr(r, k, None) for k in ("state", "reason", "cooldown_s", "analyzer")}
        for r in caplog.records
        if r.getMessage() == "analyzer_circuit"
    ]


def timed(call: Callable[[], Any]) -> tuple[float, Any]:
    started = time.monotonic()
    try:
        result: Any = call()
    except AnalyzerError as exc:
        result = exc
    return time.monotonic() - started, result


@pytest.mark.parametrize("failure", ["refused", "timeout"])
def test_after_n_failures_calls_fail_fast_and_the_rules_decide(
    analyzer_server: AnalyzerServer,
    rules_settings: Settings,
    metrics: Metrics,
    caplog: pytest.LogCaptureFixture,
    failure: str,
) -> None:
    caplog.set_level(logging.INFO, logger="workers.analyzer.client")
    url = refusing_url() if failure == "refused" else analyzer_server.url
    analyzer_server.mode = "hang"
    analyzer = HttpAnalyzer(
        url.replace("http://", f"http://bot:{PASSWORD}@"), 0.3, breaker=CircuitBreaker(3, 60.0)
    )
    analyzer.bind_metrics(metrics)
    processor = TransactionProcessor(rules_settings, analyzer)
    for _ in range(3):  # each waits for the refusal or the timeout
        effect = processor.process(make_txn(amount=497.0))
        assert effect.result["driver_used"] == "fallback"
    for index in range(20):
        txn = make_txn(id=f"t-{index}", amount=497.0)
        elapsed, effect = timed(lambda: processor.process(txn))  # noqa: B023 (called at once)
        assert elapsed < FAST_S, f"call {index} took {elapsed:.3f}s with the breaker open"
        assert effect.result["driver_used"] == "fallback"
        assert (effect.result["is_threat"], effect.result["risk_level"]) == ("true", "high")
        assert "circuit open" in effect.log_fields["analyzer_error"]
    if failure == "timeout":
        assert len(analyzer_server.requests) == 3, "an open breaker sends nothing"
    snapshot = metrics.snapshot()
    assert snapshot[f"analyzer_calls_{'error' if failure == 'refused' else 'timeout'}"] == 3
    assert (snapshot["analyzer_calls_rejected_open"], snapshot["analyzer_calls_ok"]) == (20, 0)
    assert (snapshot["analyzer_circuit_changes_open"], snapshot["analyzer_circuit_state"]) == (1, 2)
    (opened,) = circuit_events(caplog)
    assert (opened["state"], opened["cooldown_s"]) == ("open", 60.0)
    assert "3 consecutive failures" in opened["reason"]
    assert opened["analyzer"].startswith("http://bot:***@127.0.0.1:")
    assert PASSWORD not in caplog.text + str([vars(r) for r in caplog.records])


def test_after_the_cool_down_one_probe_goes_through_and_its_success_closes_the_breaker(
    analyzer_server: AnalyzerServer, metrics: Metrics, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="workers.analyzer.client")
    cooldown_s = 0.5
    analyzer = HttpAnalyzer(analyzer_server.url, 5.0, 4, breaker=CircuitBreaker(2, cooldown_s))
    analyzer.bind_metrics(metrics)
    analyzer_server.mode = "error"
    for _ in range(2):
        with pytest.raises(AnalyzerError, match="HTTP 500"):
            analyzer.assess_transaction(make_txn())
    opened_by = time.monotonic()
    analyzer_server.mode, analyzer_server.delay_s = "slow", 30.0  # held until released
    with pytest.raises(AnalyzerError, match="circuit open"):
        analyzer.assess_transaction(make_txn())
    assert len(analyzer_server.requests) == 2
    wait_for_monotonic(opened_by + cooldown_s)
    probe_result: list[Any] = []
    probe = threading.Thread(
        target=lambda: probe_result.append(timed(lambda: analyzer.assess_transaction(make_txn())))
    )
    probe.start()
    deadline = time.monotonic() + 10
    while len(analyzer_server.requests) < 3:  # the probe has reached the analyzer
        assert time.monotonic() < deadline, "the probe never reached the analyzer"
        time.sleep(0.01)
    for _ in range(10):  # while the probe is out, everyone else still fails at once
        elapsed, error = timed(lambda: analyzer.assess_transaction(make_txn()))
        assert isinstance(error, AnalyzerError) and "circuit" in str(error)
        assert elapsed < FAST_S
    assert len(analyzer_server.requests) == 3
    analyzer_server.release.set()
    probe.join(10)
    assert probe_result and probe_result[0][1].risk_level == "high"
    for _ in range(3):  # closed: calls reach the analyzer again
        assert analyzer.assess_transaction(make_txn()).risk_level == "high"
    assert len(analyzer_server.requests) == 6
    assert [(e["state"]) for e in circuit_events(caplog)] == ["open", "half_open", "closed"]
    snapshot = metrics.snapshot()
    assert (snapshot["analyzer_calls_ok"], snapshot["analyzer_calls_rejected_open"]) == (4, 11)
    assert snapshot["analyzer_circuit_state"] == 0
    assert [snapshot[f"analyzer_circuit_changes_{s}"] for s in ("open", "half_open", "closed")] == [
        1,
        1,
        1,
    ]


def test_a_failed_probe_reopens_the_breaker(analyzer_server: AnalyzerServer) -> None:
    analyzer = HttpAnalyzer(analyzer_server.url, 5.0, breaker=CircuitBreaker(1, 0.3))
    analyzer_server.mode = "error"
    with pytest.raises(AnalyzerError, match="HTTP 500"):
        analyzer.assess_transaction(make_txn())
    wait_for_monotonic(time.monotonic() + 0.3)
    with pytest.raises(AnalyzerError, match="HTTP 500"):  # the probe
        analyzer.assess_transaction(make_txn())
    elapsed, error = timed(lambda: analyzer.assess_transaction(make_txn()))
    assert isinstance(error, AnalyzerError) and "circuit open" in str(error)
    assert elapsed < FAST_S and len(analyzer_server.requests) == 2


def test_a_503_without_retry_after_is_an_ordinary_failure(analyzer_server: AnalyzerServer) -> None:
    analyzer_server.mode = "unavailable"
    analyzer = HttpAnalyzer(analyzer_server.url, 5.0, breaker=CircuitBreaker(3, 600.0))
    for _ in range(3):
        with pytest.raises(AnalyzerError, match="HTTP 503"):
            analyzer.assess_transaction(make_txn())
    with pytest.raises(AnalyzerError, match="circuit open"):
        analyzer.assess_transaction(make_txn())
    assert len(analyzer_server.requests) == 3


@pytest.mark.parametrize("concurrency", [4])
def test_threads_sharing_one_client_never_exceed_the_worker_concurrency(
    analyzer_server: AnalyzerServer,
    make_rules_settings: Callable[..., Settings],
    concurrency: int,
) -> None:
    analyzer_server.mode, analyzer_server.delay_s = "slow", 0.1
    settings = make_rules_settings(
        analyzer_url=analyzer_server.url, worker_concurrency=concurrency, analyzer_timeout_s=10
    )
    analyzer = analyzer_from_settings(settings)
    assert analyzer is not None
    start = threading.Barrier(16)
    failures: list[BaseException] = []

    def call_many(thread: int) -> None:
        start.wait()
        for index in range(3):
            try:
                analyzer.assess_transaction(make_txn(id=f"t-{thread}-{index}"))
            except BaseException as exc:
                failures.append(exc)

    threads = [threading.Thread(target=call_many, args=(n,)) for n in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert not failures, failures[:3]
    assert len(analyzer_server.requests) == 48
    assert 1 < analyzer_server.max_in_flight <= concurrency
    assert analyzer_server.max_open_connections <= concurrency
    assert len(analyzer_server.connections) <= concurrency, "a pool that blocks opens no extras"
    analyzer.close()
