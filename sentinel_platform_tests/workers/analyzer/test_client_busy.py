"""Busy is not broken: a busy analyzer makes the message wait, a down one gets the rules.

Against a real HTTP analyzer on 127.0.0.1. What is promised: a 429 (with or without
``Retry-After``) or a 503 with ``Retry-After`` raises
:class:`~sentinel_platform.streams.consumer.processor.Busy` out of both processors,
never a rules verdict, and leaves the circuit breaker closed (even one that opens at the
first failure); the ``Retry-After`` (without one, a backoff) holds every thread of the
client, which sends nothing until it ends; a 503 without it is still a failure (breaker,
fallback);
``SENTINEL_ANALYZER_WHEN_DOWN=wait`` turns "down" into Busy; and a thread that waits for
one of the worker's own connections is Busy, never an analyzer timeout.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from email.utils import formatdate
from typing import Any

import pytest

from sentinel_platform.schemas import Axiom
from sentinel_platform.settings import Settings
from sentinel_platform.streams.consumer.metrics import Metrics
from sentinel_platform.streams.consumer.processor import Busy
from sentinel_platform_tests.harness.analyzer_server import AnalyzerServer, refusing_url
from sentinel_platform_tests.harness.waits import wait_until
from sentinel_platform_tests.workers.processors.test_axioms import make_axiom
from sentinel_platform_tests.workers.processors.test_transactions import make_txn
from workers.analyzer import HttpAnalyzer, NoFreeConnection, analyzer_from_settings
from workers.analyzer.breaker import CircuitBreaker
from workers.processors import AxiomProcessor, TransactionProcessor


@pytest.fixture
def metrics() -> Iterator[Metrics]:
    instance = Metrics(labels={"stream": "transactions"})
    yield instance
    instance.close()


def audited_axiom() -> Axiom:
    return make_axiom(status="critical", anomaly_score=0.99)


def outcomes(metrics: Metrics) -> dict[str, float]:
    snapshot = metrics.snapshot()
    names = ("ok", "error", "timeout", "rejected_open", "busy")
    return {name: snapshot[f"analyzer_calls_{name}"] for name in names}


@pytest.mark.parametrize(
    ("mode", "retry_after", "expected_s"),
    [
        ("rate_limited", "2", 2.0),
        ("unavailable", "2", 2.0),
        ("rate_limited", "date", 2.0),
        ("rate_limited", None, None),
    ],
    ids=["429-seconds", "503-seconds", "429-http-date", "429-without-retry-after"],
)
def test_a_busy_analyzer_raises_busy_through_both_processors_and_never_opens_the_breaker(
    analyzer_server: AnalyzerServer,
    rules_settings: Settings,
    metrics: Metrics,
    mode: str,
    retry_after: str | None,
    expected_s: float | None,
) -> None:
    analyzer_server.mode = mode
    analyzer_server.retry_after = (
        formatdate(time.time() + 3, usegmt=True) if retry_after == "date" else retry_after
    )
    # A breaker that opens at the first failure: a busy answer counted as one would show.
    analyzer = HttpAnalyzer(analyzer_server.url, 5.0, 4, breaker=CircuitBreaker(1, 600.0))
    analyzer.bind_metrics(metrics)
    transactions = TransactionProcessor(rules_settings, analyzer)
    with pytest.raises(Busy) as caught:
        transactions.process(make_txn(category="suspicious"))
    answered_at = time.monotonic()
    if expected_s is None:  # no wait given: the SDKs' first backoff, 0.5 s less jitter
        assert 0.375 <= (caught.value.retry_after_s or 0) <= 0.5, caught.value.reason
        assert "no wait given" in caught.value.reason
    else:  # an HTTP date has whole seconds: up to one of the three is lost
        assert 1.0 < (caught.value.retry_after_s or 0) <= 3.0
    assert f"HTTP {429 if mode == 'rate_limited' else 503}" in caught.value.reason
    assert analyzer.breaker.state == "closed"
    axioms = AxiomProcessor(rules_settings, analyzer)
    with pytest.raises(Busy):  # the audit path too: a Busy, not a "high" fallback
        axioms.process(audited_axiom())
    analyzer_server.mode = "ok"
    # The hold covers the whole client: nothing is sent until the wait (or, with no
    # Retry-After, the backoff) ends.
    assert len(analyzer_server.requests) == 1
    assert outcomes(metrics) == {
        "ok": 0,
        "error": 0,
        "timeout": 0,
        "rejected_open": 0,
        "busy": 2,
    }
    effect = wait_until(lambda: _verdict_or_none(transactions), timeout_s=15, what="the hold ends")
    assert time.monotonic() - answered_at >= caught.value.retry_after_s - 0.05  # type: ignore[operator]
    assert len(analyzer_server.requests) == 2
    assert effect.result["driver_used"] == "analyzer"
    assert analyzer.breaker.state == "closed"
    counted = outcomes(metrics)
    assert (counted["error"], counted["timeout"], counted["rejected_open"]) == (0, 0, 0)
    assert counted["ok"] == 1 and counted["busy"] >= 2


def _verdict_or_none(processor: TransactionProcessor) -> Any:
    try:
        return processor.process(make_txn())
    except Busy:
        return None


def test_a_503_without_retry_after_is_still_down_the_rules_decide_and_the_breaker_opens(
    analyzer_server: AnalyzerServer, rules_settings: Settings, metrics: Metrics
) -> None:
    analyzer_server.mode = "unavailable"
    analyzer = HttpAnalyzer(analyzer_server.url, 5.0, breaker=CircuitBreaker(2, 600.0))
    analyzer.bind_metrics(metrics)
    processor = TransactionProcessor(rules_settings, analyzer)
    for _ in range(3):
        effect = processor.process(make_txn(amount=497.0))
        assert effect.result["driver_used"] == "fallback"
        assert (effect.result["is_threat"], effect.result["risk_level"]) == ("true", "high")
    assert analyzer.breaker.state == "open"
    assert len(analyzer_server.requests) == 2
    counted = outcomes(metrics)
    assert (counted["error"], counted["rejected_open"], counted["busy"]) == (2, 1, 0)


@pytest.mark.parametrize("failure", ["refused", "http-500"])
def test_wait_mode_makes_a_down_analyzer_busy_instead_of_a_rules_verdict(
    analyzer_server: AnalyzerServer,
    make_rules_settings: Callable[..., Settings],
    metrics: Metrics,
    failure: str,
) -> None:
    analyzer_server.mode = "error"
    settings = make_rules_settings(
        analyzer_url=refusing_url() if failure == "refused" else analyzer_server.url,
        analyzer_when_down="wait",
        analyzer_breaker_failures=2,
        analyzer_breaker_cooldown_s=600,
    )
    analyzer = analyzer_from_settings(settings)
    assert analyzer is not None and analyzer.when_down == "wait"
    analyzer.bind_metrics(metrics)
    processor = TransactionProcessor(settings, analyzer)
    for _ in range(2):  # down: each call fails, the breaker counts it, the message waits
        with pytest.raises(Busy) as caught:
            processor.process(make_txn(amount=497.0))
        assert caught.value.retry_after_s is None
        assert "waiting for the analyzer" in caught.value.reason
        assert not caught.value.sent, "down is no capacity signal: the limit is not cut"
    assert analyzer.breaker.state == "open"
    with pytest.raises(Busy) as open_breaker:  # open: Busy until its probe may go
        processor.process(make_txn())
    assert 590 < (open_breaker.value.retry_after_s or 0) <= 600
    assert not open_breaker.value.sent, "refused by the breaker: never sent"
    counted = outcomes(metrics)
    assert counted["rejected_open"] == 1 and counted["busy"] == 0
    assert counted["error"] == 2, "a down analyzer is still a failure: only the verdict waits"
    analyzer.close()


def test_in_wait_mode_a_timeout_is_a_busy_answer_that_cuts_the_limit(
    analyzer_server: AnalyzerServer, make_rules_settings: Callable[..., Settings]
) -> None:
    """A slow answer is the in-flight limit's drop (``Busy.sent``), unlike a refusal or a
    5xx: those say the analyzer is down, not that this worker sends too much."""
    analyzer_server.mode = "hang"
    settings = make_rules_settings(
        analyzer_url=analyzer_server.url, analyzer_when_down="wait", analyzer_timeout_s=0.3
    )
    analyzer = analyzer_from_settings(settings)
    assert analyzer is not None
    with pytest.raises(Busy) as caught:
        TransactionProcessor(settings, analyzer).process(make_txn(amount=497.0))
    assert caught.value.sent and "waiting for the analyzer" in caught.value.reason
    analyzer.close()


def test_the_rules_mode_is_the_default(rules_settings: Settings) -> None:
    assert rules_settings.analyzer_when_down == "rules"


def test_waiting_for_a_local_connection_is_busy_never_an_analyzer_timeout(
    analyzer_server: AnalyzerServer, rules_settings: Settings, metrics: Metrics
) -> None:
    # 2 connections, calls of 0.6 s, a 1 s timeout, 10 threads at once: the first two
    # waves get a connection in time, the later ones wait longer than the timeout for
    # one. The analyzer itself always answers well within the timeout.
    analyzer_server.mode, analyzer_server.delay_s = "slow", 0.6
    analyzer = HttpAnalyzer(analyzer_server.url, 1.0, 2, breaker=CircuitBreaker(1, 600.0))
    analyzer.bind_metrics(metrics)
    processor = TransactionProcessor(rules_settings, analyzer)
    start = threading.Barrier(10)
    results: list[Any] = []
    lock = threading.Lock()

    def call(index: int) -> None:
        start.wait()
        try:
            result: Any = processor.process(make_txn(id=f"t-{index}"))
        except Exception as exc:
            result = exc
        with lock:
            results.append(result)

    threads = [threading.Thread(target=call, args=(n,)) for n in range(10)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(results) == 10
    waited = [r for r in results if isinstance(r, Busy)]
    verdicts = [r.result["driver_used"] for r in results if not isinstance(r, Exception)]
    assert waited, "some threads must have waited longer than the timeout for a connection"
    assert all(isinstance(r, NoFreeConnection) for r in waited)
    assert all(r.retry_after_s is None and "local pool" in r.reason for r in waited)
    assert len(waited) + len(verdicts) == 10, [r for r in results if isinstance(r, Exception)]
    assert set(verdicts) == {"analyzer"}, "no rules verdict for want of a local connection"
    assert analyzer.breaker.state == "closed"
    counted = outcomes(metrics)
    assert (counted["timeout"], counted["error"]) == (0, 0)
    assert (counted["busy"], counted["ok"]) == (len(waited), len(verdicts))
    assert len(analyzer_server.requests) == len(verdicts), "a call never sent reaches nobody"
    assert analyzer_server.max_open_connections <= 2
    analyzer.close()


@pytest.mark.parametrize(("pinned", "expected"), [("3", 3), ("auto", 16)])
def test_the_pool_holds_as_many_connections_as_the_largest_in_flight_limit(
    make_rules_settings: Callable[..., Settings], pinned: str, expected: int
) -> None:
    settings = make_rules_settings(
        analyzer_url="http://127.0.0.1:9/assess",
        worker_concurrency=pinned,
        worker_concurrency_max=16,
    )
    analyzer = analyzer_from_settings(settings)
    assert analyzer is not None and analyzer.max_connections == expected
