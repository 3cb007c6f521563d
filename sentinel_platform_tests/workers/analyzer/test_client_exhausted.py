"""Exhausted is not down: a rejected key stops the client's calls, not its breaker.

Against a real HTTP analyzer on 127.0.0.1 and the suite's real redis-server. What is
promised: a 401 or 403 makes one call, then none (the fleet hold, shared through Redis,
lasts past today's one-hour ``Retry-After`` cap); the breaker stays closed even when it
opens at the first failure; the message gets the rules (``when_down=rules``) or waits
(``wait``: :class:`Busy`); the metrics count ``exhausted`` and set the gauge.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import datetime, timezone

import pytest

from sentinel_platform.settings import Settings
from sentinel_platform.streams.consumer.metrics import Metrics
from sentinel_platform.streams.consumer.processor import Busy
from sentinel_platform.streams.operators import analyzer_holds as holds
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform_tests.harness.analyzer_server import AnalyzerServer
from sentinel_platform_tests.harness.waits import wait_until
from sentinel_platform_tests.workers.processors.test_transactions import make_txn
from workers.analyzer import AnalyzerExhausted, HttpAnalyzer
from workers.analyzer.breaker import CircuitBreaker
from workers.analyzer.limits.fleet_limits import EXHAUSTED, FleetExhausted, FleetLimits
from workers.analyzer.limits.token_budget import TokenBudget, budget_key, seconds_to_midnight
from workers.processors import TransactionProcessor


@pytest.fixture
def metrics() -> Iterator[Metrics]:
    instance = Metrics(labels={"stream": "transactions"})
    yield instance
    instance.close()


def analyzer(
    server: AnalyzerServer, redis_client: RedisClient, metrics: Metrics, when_down: str
) -> HttpAnalyzer:
    client = HttpAnalyzer(
        server.url,
        timeout_s=2.0,
        breaker=CircuitBreaker(failures=1, cooldown_s=60),
        when_down=when_down,  # type: ignore[arg-type]
        limits=FleetLimits("exhausted-test"),
    )
    client.bind_redis(redis_client)
    client.bind_metrics(metrics)
    return client


@pytest.mark.parametrize("status", [401, 403])
def test_a_rejected_key_is_one_call_then_the_rules_and_the_breaker_stays_closed(
    analyzer_server: AnalyzerServer,
    redis_client: RedisClient,
    settings: Settings,
    metrics: Metrics,
    status: int,
) -> None:
    analyzer_server.mode, analyzer_server.refused_status = "refused", status
    client = analyzer(analyzer_server, redis_client, metrics, "rules")
    with pytest.raises(AnalyzerExhausted) as caught:
        client.assess_transaction(make_txn())
    assert (caught.value.cause, caught.value.until_s) == ("rejected_key", None)
    processor = TransactionProcessor(settings, client)
    for _ in range(5):
        effect = processor.process(make_txn())
        assert effect.result["driver_used"] == "fallback"
    assert len(analyzer_server.requests) == 1, "the hold stops every later call"
    assert client.breaker.state == "closed", "a rejected key is no outage"
    snapshot = metrics.snapshot()
    assert snapshot["analyzer_calls_exhausted"] == 6
    assert snapshot["analyzer_calls_error"] == 0
    assert snapshot["analyzer_exhausted"] == 1
    left_ms = int(redis_client.pttl(client.limits.hold_key))
    assert left_ms == -1, "no reset in the answer: held until released, past the 1 h cap"
    client.close()


def test_a_rejected_key_with_when_down_wait_keeps_the_message_waiting(
    analyzer_server: AnalyzerServer,
    redis_client: RedisClient,
    settings: Settings,
    metrics: Metrics,
) -> None:
    analyzer_server.mode = "refused"
    client = analyzer(analyzer_server, redis_client, metrics, "wait")
    processor = TransactionProcessor(settings, client)
    for _ in range(3):
        with pytest.raises(Busy) as caught:
            processor.process(make_txn())
        assert caught.value.retry_after_s is not None and caught.value.retry_after_s > 0
        assert not caught.value.sent, "the wait is no capacity signal"
    assert len(analyzer_server.requests) == 1
    assert client.breaker.state == "closed"
    client.close()


def test_the_first_success_after_an_exhaustion_clears_the_gauge(
    analyzer_server: AnalyzerServer,
    redis_client: RedisClient,
    metrics: Metrics,
) -> None:
    analyzer_server.mode = "refused"
    client = analyzer(analyzer_server, redis_client, metrics, "rules")
    with pytest.raises(AnalyzerExhausted):
        client.assess_transaction(make_txn())
    assert metrics.snapshot()["analyzer_exhausted"] == 1
    # The key replaced, an operator releases the hold: the client learns it from Redis.
    analyzer_server.mode = "ok"
    redis_client.delete(client.limits.hold_key)
    wait_until(lambda: client.limits.held_for() == 0, timeout_s=5, what="the release")
    assert client.assess_transaction(make_txn()).risk_level == "high"
    assert metrics.snapshot()["analyzer_exhausted"] == 0
    client.close()


class WatchedConnections(threading.BoundedSemaphore):
    """The client's connection semaphore, counting the calls waiting for a connection."""

    def __init__(self, value: int) -> None:
        super().__init__(value)
        self.waiting = 0

    def acquire(self, blocking: bool = True, timeout: float | None = None) -> bool:
        self.waiting += 1
        try:
            return super().acquire(blocking, timeout)
        finally:
            self.waiting -= 1


def test_a_call_waiting_for_a_connection_is_not_sent_once_the_fleet_is_exhausted(
    analyzer_server: AnalyzerServer,
    redis_client: RedisClient,
    metrics: Metrics,
) -> None:
    """A call that passed the hold check, then waited for the worker's one connection
    while another call of this worker was refused as exhausted, is held, not sent: the
    calls that slipped out this way made several calls per worker after the exhaustion."""
    client = analyzer(analyzer_server, redis_client, metrics, "rules")
    connections = WatchedConnections(1)
    client.exchange.connections = connections  # one connection, and a view of who waits for it
    connections.acquire()  # the other call's, under way
    outcome: list[BaseException] = []

    def call() -> None:
        try:
            client.assess_transaction(make_txn())
        except BaseException as exc:  # what the call ended with is the subject
            outcome.append(exc)

    waiting = threading.Thread(target=call, name="waiting-call")
    waiting.start()
    wait_until(lambda: connections.waiting == 1, timeout_s=10, what="the call waits")
    # the other call was refused: the worker holds the fleet before its connection is free
    client.limits.hold(None, "insufficient_quota: quota spent", cause=EXHAUSTED)
    connections.release()
    waiting.join(timeout=10)
    assert not waiting.is_alive()
    assert analyzer_server.requests == [], "sent after the exhaustion was known"
    assert [type(exc) for exc in outcome] == [AnalyzerExhausted]
    assert client.breaker.state == "closed"
    client.close()


@pytest.mark.parametrize("when_down", ["rules", "wait"])
def test_a_spent_daily_budget_holds_the_fleet_like_any_exhaustion(
    analyzer_server: AnalyzerServer,
    redis_client: RedisClient,
    settings: Settings,
    metrics: Metrics,
    when_down: str,
) -> None:
    budget = TokenBudget("exhausted-test", daily_tokens=1000)
    day = datetime.now(timezone.utc).strftime("%Y-%m-%d")
    redis_client.set(budget_key("exhausted-test", f"day:{day}"), 1000)  # spent by the fleet
    client = HttpAnalyzer(
        analyzer_server.url,
        timeout_s=2.0,
        when_down=when_down,  # type: ignore[arg-type]
        limits=FleetLimits("exhausted-test"),
        budget=budget,
    )
    client.bind_redis(redis_client)
    client.bind_metrics(metrics)
    expected = AnalyzerExhausted if when_down == "rules" else Busy
    with pytest.raises(expected):
        client.assess_transaction(make_txn())
    hold = holds.read_hold(redis_client, "exhausted-test")
    assert hold is not None and hold.cause == EXHAUSTED
    assert hold.reason.startswith("daily_tokens: daily token budget spent"), hold.reason
    to_midnight = seconds_to_midnight(datetime.now(timezone.utc))
    assert hold.seconds_left is not None and to_midnight - 60 < hold.seconds_left <= to_midnight + 1
    assert analyzer_server.requests == [], "nothing is sent once the budget is spent"
    other = FleetLimits("exhausted-test", client=redis_client)  # another worker of the fleet
    with pytest.raises(FleetExhausted):
        other.check_hold()
    assert client.breaker.state == "closed"
    assert metrics.snapshot()["analyzer_exhausted"] == 1
    client.close()
