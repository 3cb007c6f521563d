"""The analyzer as the real workers use it: ``python -m sentinel_platform.workers <stream>`` with
``SENTINEL_ANALYZER_URL`` set, against a real HTTP analyzer on 127.0.0.1 and a real Redis.

What is promised: only axioms scoring strictly above the audit threshold reach the
analyzer; one worker keeps reusing a few TCP connections instead of opening one per
message; and whatever way the analyzer fails (HTTP 500, a hang past the timeout, nobody
listening) the committed compliance event says ``driver_used=fallback``; while a busy
one (429 + ``Retry-After``) costs time, never an AI verdict, a delivery or a dead letter.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from sentinel_platform.redis_server import free_port
from sentinel_platform.schemas import DEMO_FIELD, DEMO_VALUE
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, axiom_keys, transaction_keys
from sentinel_platform_tests.harness.analyzer_server import AnalyzerServer
from sentinel_platform_tests.harness.analyzer_stub import AnalyzerStub
from sentinel_platform_tests.harness.model_lanes import scrape_samples
from sentinel_platform_tests.harness.processes import Child, Fleet, child_env, wait_leases
from sentinel_platform_tests.harness.waits import wait_until
from sentinel_platform_tests.workers.processors.test_transactions import BASE

THRESHOLD = 0.5
ANALYZER_PASSWORD = "An4lyz3r-Pw"
#: Per test, far more audited messages than the worker may open connections for them.
AUDITED = 40
#: Calls at once pinned for the connection tests: the client keeps at most that many.
MAX_CONNECTIONS = 3


def axiom_entry(index: int, score: float) -> dict[str, str]:
    return {
        "status": "degraded",
        "metric_value": "3.5",
        "anomaly_score": repr(score),
        "source_id": f"sensor-{index}",
        "emitted_at": "2026-11-21T10:00:00Z",
        "domain": "aml",
    }


StartWorker = Callable[..., Child]


@pytest.fixture
def start_worker(fleet: Fleet, settings: Settings, redis_client: RedisClient) -> StartWorker:
    """``start_worker(kind, analyzer_url, **settings)``: a live worker using that analyzer."""

    def start(kind: str, analyzer_url: str, **extra_settings: Any) -> Child:
        env = child_env(
            settings.redis_url_value,
            settings.home_dir,
            analyzer_url=analyzer_url,
            axiom_audit_threshold=THRESHOLD,
            **extra_settings,
        )
        keys = axiom_keys(settings) if kind == "axioms" else transaction_keys(settings)
        worker = fleet.worker(kind, f"analyzer-{kind}", env)
        wait_leases(redis_client, keys, [worker], timeout_s=60)
        return worker

    return start


def process_all(client: RedisClient, keys: StreamKeys, entries: list[dict[str, str]]) -> None:
    """Add every entry to the source stream; wait until the worker has a result for each."""
    for fields in entries:
        client.xadd(keys.stream, fields)
    wait_until(lambda: client.xlen(keys.results) == len(entries), timeout_s=60)


def with_credentials(url: str) -> str:
    return url.replace("http://", f"http://bot:{ANALYZER_PASSWORD}@", 1)


def results_by_source(client: RedisClient, stream: str) -> dict[str, Mapping[str, str]]:
    return {fields["source_id"]: fields for _, fields in client.xrange(stream)}


def test_worker_sends_only_scores_strictly_above_the_threshold_over_reused_connections(
    analyzer_server: AnalyzerServer,
    start_worker: StartWorker,
    settings: Settings,
    redis_client: RedisClient,
) -> None:
    analyzer_server.reply = {"is_threat": True, "risk_level": "low", "narrative": "model says"}
    keys = axiom_keys(settings)
    url = with_credentials(analyzer_server.url)
    worker = start_worker("axioms", url, worker_concurrency=MAX_CONNECTIONS)
    scores = [0.1, THRESHOLD, 0.5000001, 0.99, 1.0] * (AUDITED // 3)
    process_all(redis_client, keys, [axiom_entry(i, score) for i, score in enumerate(scores)])
    results = results_by_source(redis_client, keys.results)
    above = {f"sensor-{i}" for i, score in enumerate(scores) if score > THRESHOLD}
    asked = [request["body"]["payload"]["source_id"] for request in analyzer_server.requests]
    assert sorted(asked) == sorted(above), "exactly the scores strictly above reach it, once each"
    for source, event in results.items():
        expected = ("true", "analyzer", "low") if source in above else ("false", "rules", "medium")
        assert (event["routed_to_ai"], event["driver_used"], event["risk_level"]) == expected
    basic = "Basic " + base64.b64encode(f"bot:{ANALYZER_PASSWORD}".encode()).decode()
    for request in analyzer_server.requests:
        assert (request["path"], request["headers"]["authorization"]) == ("/assess", basic)
    assert 1 <= len(analyzer_server.connections) <= MAX_CONNECTIONS, (
        f"{len(asked)} calls used {len(analyzer_server.connections)} TCP connections"
    )
    assert worker.stop() == 0, worker.log_tail()
    assert ANALYZER_PASSWORD not in worker.log_text()


def test_transaction_worker_asks_the_analyzer_for_each_verdict(
    analyzer_server: AnalyzerServer,
    start_worker: StartWorker,
    settings: Settings,
    redis_client: RedisClient,
) -> None:
    analyzer_server.reply = {"is_threat": True, "risk_level": "medium", "narrative": "odd"}
    keys = transaction_keys(settings)
    worker = start_worker("transactions", analyzer_server.url, worker_concurrency=MAX_CONNECTIONS)
    ids = [f"t-{i}" for i in range(AUDITED)]
    process_all(redis_client, keys, [{"data": json.dumps({**BASE, "id": i})} for i in ids])
    verdicts = [fields for _, fields in redis_client.xrange(keys.results)]
    assert {v["txn_id"] for v in verdicts} == set(ids)
    assert {(v["driver_used"], v["is_threat"], v["risk_level"]) for v in verdicts} == {
        ("analyzer", "true", "medium")
    }
    assert sorted(r["body"]["payload"]["id"] for r in analyzer_server.requests) == sorted(ids)
    assert 1 <= len(analyzer_server.connections) <= MAX_CONNECTIONS
    assert worker.stop() == 0, worker.log_tail()


@pytest.mark.parametrize("kind", ["transactions", "axioms"])
def test_demo_entries_never_reach_the_analyzer_and_their_results_keep_the_mark(
    analyzer_server: AnalyzerServer,
    start_worker: StartWorker,
    settings: Settings,
    redis_client: RedisClient,
    kind: str,
) -> None:
    """The demo runs by itself: its entries are decided by the rules, never by a paid call,
    and their results carry the mark the reports leave out; a user's entries beside them
    still reach the analyzer, and their results carry no mark."""
    analyzer_server.reply = {"is_threat": True, "risk_level": "high", "narrative": "model says"}
    keys = transaction_keys(settings) if kind == "transactions" else axiom_keys(settings)
    worker = start_worker(kind, analyzer_server.url)
    if kind == "transactions":
        entries = [{"data": json.dumps({**BASE, "id": f"k-{i}"})} for i in range(6)]
    else:  # every score above the threshold: each one is audited, so each may be asked
        entries = [axiom_entry(i, 0.9) for i in range(6)]
    demo = {i for i in range(6) if i % 2 == 0}
    process_all(
        redis_client,
        keys,
        [
            {**fields, DEMO_FIELD: DEMO_VALUE} if i in demo else fields
            for i, fields in enumerate(entries)
        ],
    )
    key_field = "txn_id" if kind == "transactions" else "source_id"
    prefix = "k-" if kind == "transactions" else "sensor-"
    results = {f[key_field]: f for _, f in redis_client.xrange(keys.results)}
    for i in range(6):
        result = results[f"{prefix}{i}"]
        expected = ("rules", DEMO_VALUE) if i in demo else ("analyzer", None)
        assert (result["driver_used"], result.get(DEMO_FIELD)) == expected, result
    payload_key = "id" if kind == "transactions" else "source_id"
    asked = sorted(r["body"]["payload"][payload_key] for r in analyzer_server.requests)
    assert asked == sorted(f"{prefix}{i}" for i in range(6) if i not in demo)
    assert worker.stop() == 0, worker.log_tail()


@pytest.mark.parametrize("failure", ["http-500", "timeout", "refused"])
def test_failing_analyzer_commits_rule_based_fallback(
    analyzer_server: AnalyzerServer,
    start_worker: StartWorker,
    settings: Settings,
    redis_client: RedisClient,
    failure: str,
) -> None:
    url = with_credentials(analyzer_server.url)
    if failure == "http-500":
        analyzer_server.mode = "error"
    elif failure == "timeout":
        analyzer_server.mode = "hang"
    else:
        url = with_credentials(f"http://127.0.0.1:{free_port()}/assess")
    keys = axiom_keys(settings)
    # Re-screening off: the fallbacks' queued re-screens would ask the analyzer again.
    worker = start_worker("axioms", url, analyzer_timeout_s=0.3, analyzer_rescreen=False)
    scores = [0.2, 0.9, 0.95]
    process_all(redis_client, keys, [axiom_entry(i, score) for i, score in enumerate(scores)])
    results = results_by_source(redis_client, keys.results)
    assert results["sensor-0"]["driver_used"] == "rules"
    for source in ("sensor-1", "sensor-2"):
        event = results[source]
        assert (event["routed_to_ai"], event["driver_used"], event["risk_level"]) == (
            "true",
            "fallback",
            "high",
        )
        assert event["audit_narrative"].startswith("Rule-based fallback")
    if failure != "refused":
        asked = sorted(r["body"]["payload"]["source_id"] for r in analyzer_server.requests)
        assert asked == ["sensor-1", "sensor-2"]
    assert redis_client.xlen(keys.dlq) == 0
    assert worker.stop() == 0, worker.log_tail()
    logs = [json.loads(line) for line in worker.log_text().splitlines() if line.startswith("{")]
    (outage,) = [entry for entry in logs if entry["event"] == "analyzer_unavailable"]
    assert outage["level"] == "warning" and outage["error"]
    assert ANALYZER_PASSWORD not in worker.log_text()


def test_bad_analyzer_url_stops_the_worker_at_start_up_naming_the_setting(
    fleet: Fleet, settings: Settings, tmp_path: Path
) -> None:
    env = child_env(
        settings.redis_url_value, settings.home_dir, analyzer_url="ftp://bot:An4lyz3rPw@host/x"
    )
    worker = fleet.worker("axioms", "bad-analyzer-url", env)
    wait_until(lambda: not worker.alive(), timeout_s=60)
    output = worker.log_text()
    assert worker.process.returncode == 2, output
    assert "SENTINEL_ANALYZER_URL" in output
    assert "http://" in output and "https://" in output
    assert "An4lyz3rPw" not in output
    assert "Traceback" not in output


def analyzer_calls(samples: Mapping[str, float], outcome: str) -> float:
    (value,) = [
        v
        for k, v in samples.items()
        if k.startswith("sentinel_worker_analyzer_calls_total{") and f'outcome="{outcome}"' in k
    ]
    return value


def test_worker_with_a_refusing_analyzer_opens_the_breaker_and_lets_the_rules_decide(
    fleet: Fleet, settings: Settings, redis_client: RedisClient
) -> None:
    failures = 3
    env = child_env(
        settings.redis_url_value,
        settings.home_dir,
        analyzer_url=with_credentials(f"http://127.0.0.1:{free_port()}/assess"),
        analyzer_timeout_s=2.0,
        analyzer_breaker_failures=failures,
        analyzer_breaker_cooldown_s=600,
        worker_concurrency=1,  # one call at a time: exactly N reach the dead port
    )
    keys = transaction_keys(settings)
    worker = fleet.worker("transactions", "breaker-worker", env, extra=["--metrics-port", "0"])
    wait_leases(redis_client, keys, [worker], timeout_s=60)
    ids = [f"t-{i}" for i in range(AUDITED)]
    entries = [{"data": json.dumps({**BASE, "id": i, "amount": 497.0})} for i in ids]
    process_all(redis_client, keys, entries)
    verdicts = [fields for _, fields in redis_client.xrange(keys.results)]
    assert {(v["driver_used"], v["is_threat"], v["risk_level"]) for v in verdicts} == {
        ("fallback", "true", "high")
    }
    logs = [json.loads(line) for line in worker.log_text().splitlines() if line.startswith("{")]
    (serving,) = [entry for entry in logs if entry["event"] == "metrics_serving"]
    samples = scrape_samples(serving["url"])
    assert analyzer_calls(samples, "error") == failures, "only N calls reach the dead port"
    assert analyzer_calls(samples, "rejected_open") == AUDITED - failures
    assert analyzer_calls(samples, "ok") == 0
    state = [
        v for k, v in samples.items() if k.startswith("sentinel_worker_analyzer_circuit_state")
    ]
    assert state == [2.0], "the gauge says open"
    assert worker.stop() == 0, worker.log_tail()
    logs = [json.loads(line) for line in worker.log_text().splitlines() if line.startswith("{")]
    (opened,) = [entry for entry in logs if entry["event"] == "analyzer_circuit"]
    assert (opened["state"], opened["cooldown_s"]) == ("open", 600.0)
    assert f"{failures} consecutive failures" in opened["reason"]
    assert opened["analyzer"].startswith("http://bot:***@127.0.0.1:")
    assert ANALYZER_PASSWORD not in worker.log_text()


def circuit_state(url: str) -> float:
    (value,) = [
        v
        for k, v in scrape_samples(url).items()
        if k.startswith("sentinel_worker_analyzer_circuit_state")
    ]
    return value


def test_the_breaker_gauge_says_open_only_while_the_cool_down_refuses_calls(
    analyzer_server: AnalyzerServer, fleet: Fleet, settings: Settings, redis_client: RedisClient
) -> None:
    """A short outage opens the breaker; the stream then goes idle, so no call moves the
    breaker on. Once its cool-down is over nothing is refused, and the scraped gauge
    must say so (it said open for ever, and ``SentinelAnalyzerBreakerOpen`` fired).
    Re-screening is off: the fallbacks' queued re-screens would call once it is over."""
    cooldown_s = 5.0
    analyzer_server.mode = "error"
    env = child_env(
        settings.redis_url_value,
        settings.home_dir,
        analyzer_url=analyzer_server.url,
        analyzer_breaker_failures=2,
        analyzer_breaker_cooldown_s=cooldown_s,
        worker_concurrency=1,
        analyzer_rescreen=False,
    )
    keys = transaction_keys(settings)
    worker = fleet.worker("transactions", "idle-breaker", env, extra=["--metrics-port", "0"])
    wait_leases(redis_client, keys, [worker], timeout_s=60)
    (serving,) = worker.events("metrics_serving")
    entries = [{"data": json.dumps({**BASE, "id": f"idle-{i}"})} for i in range(4)]
    process_all(redis_client, keys, entries)
    opened_by = time.monotonic()
    assert len(analyzer_server.requests) == 2, "the breaker opened after two failures"
    assert circuit_state(serving["url"]) == 2, "open: the cool-down refuses calls"
    wait_until(
        lambda: circuit_state(serving["url"]) == 0,
        timeout_s=cooldown_s + 30,
        interval_s=0.2,
        what="the gauge no longer saying open once the cool-down is over",
    )
    assert time.monotonic() - opened_by >= cooldown_s - 1, "not before its cool-down"
    assert len(analyzer_server.requests) == 2, "no call moved the breaker on"
    assert worker.stop() == 0, worker.tail()


def test_a_concurrent_worker_never_has_more_analyzer_calls_out_than_its_concurrency(
    analyzer_server: AnalyzerServer,
    fleet: Fleet,
    settings: Settings,
    redis_client: RedisClient,
) -> None:
    concurrency = 4
    analyzer_server.mode, analyzer_server.delay_s = "slow", 0.1
    env = child_env(settings.redis_url_value, settings.home_dir, analyzer_url=analyzer_server.url)
    keys = transaction_keys(settings)
    extra = ["--concurrency", str(concurrency)]
    worker = fleet.worker("transactions", "concurrent-analyzer", env, extra=extra)
    wait_leases(redis_client, keys, [worker], timeout_s=60)
    ids = [f"t-{i}" for i in range(AUDITED)]
    process_all(redis_client, keys, [{"data": json.dumps({**BASE, "id": i})} for i in ids])
    verdicts = [fields for _, fields in redis_client.xrange(keys.results)]
    assert {v["driver_used"] for v in verdicts} == {"analyzer"}
    assert 1 < analyzer_server.max_in_flight <= concurrency
    assert analyzer_server.max_open_connections <= concurrency
    assert len(analyzer_server.connections) <= concurrency
    assert worker.stop() == 0, worker.log_tail()


def test_a_busy_analyzer_costs_the_worker_time_never_an_ai_verdict(
    analyzer_server: AnalyzerServer,
    start_worker: StartWorker,
    settings: Settings,
    redis_client: RedisClient,
) -> None:
    # The first calls meet a 429 + Retry-After: 1, which holds the worker's every call for
    # a second; afterwards the analyzer answers. Nothing may be decided by the rules, no
    # delivery attempt may be spent on it, nothing dead-lettered.
    analyzer_server.busy_first, analyzer_server.retry_after = 6, "1"
    analyzer_server.reply = {"is_threat": False, "risk_level": "low", "narrative": "fine"}
    keys = transaction_keys(settings)
    worker = start_worker("transactions", analyzer_server.url, worker_concurrency=4)
    ids = [f"t-{i}" for i in range(20)]
    for txn_id in ids:
        redis_client.xadd(keys.stream, {"data": json.dumps({**BASE, "id": txn_id})})
    wait_until(
        lambda: redis_client.xlen(keys.results) + redis_client.xlen(keys.dlq) == len(ids),
        timeout_s=60,
        what="a verdict or a dead letter for every message",
    )
    assert worker.stop() == 0, worker.log_tail()
    assert "processing_failed" not in worker.log_text(), "a busy analyzer is not a failure"
    assert redis_client.xlen(keys.dlq) == 0
    verdicts = [fields for _, fields in redis_client.xrange(keys.results)]
    assert sorted(v["txn_id"] for v in verdicts) == sorted(ids)
    assert {v["driver_used"] for v in verdicts} == {"analyzer"}, "no rules verdict for busy"
    busy = analyzer_server.requests[: analyzer_server.busy_first]
    answered = analyzer_server.requests[analyzer_server.busy_first :]
    assert len(answered) == len(ids), "each message answered once"
    assert answered[0]["at"] - busy[0]["at"] >= 0.95, "the Retry-After was honoured"


def test_a_worker_on_the_defaults_finds_a_busy_analyzers_capacity_and_never_falls_back(
    start_worker: StartWorker, settings: Settings, redis_client: RedisClient
) -> None:
    """The default, ``SENTINEL_WORKER_CONCURRENCY=auto``, against a service that serves 8
    calls at once in 100 ms and answers 429 + ``Retry-After: 1`` beyond: the worker runs
    several calls at once (a pinned 1 never would), every verdict is the analyzer's (a
    busy analyzer never costs a rules verdict), nothing is dead-lettered."""
    keys = transaction_keys(settings)
    with AnalyzerStub(0.1, capacity=8, mode="reject", retry_after="1") as stub:
        worker = start_worker("transactions", stub.url)  # no concurrency setting: auto
        ids = [f"auto-{i}" for i in range(120)]
        pipe = redis_client.pipeline(transaction=False)
        for txn_id in ids:
            pipe.xadd(keys.stream, {"data": json.dumps({**BASE, "id": txn_id})})
        pipe.execute()
        wait_until(
            lambda: redis_client.xlen(keys.results) + redis_client.xlen(keys.dlq) == len(ids),
            timeout_s=120,
            what="a verdict or a dead letter for every message",
        )
        counters = stub.counters()
    assert worker.stop() == 0, worker.log_tail()
    assert redis_client.xlen(keys.dlq) == 0
    verdicts = [fields for _, fields in redis_client.xrange(keys.results)]
    assert {v["driver_used"] for v in verdicts} == {"analyzer"}, "no rules verdict for busy"
    assert counters["peak_serving"] >= 4, counters  # it found capacity beyond one call
    assert counters["answered"] == len(ids), counters  # each message answered once
