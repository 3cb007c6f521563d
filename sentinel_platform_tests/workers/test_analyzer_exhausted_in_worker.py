"""An exhausted analyzer stops the whole fleet at once: real worker processes
(``python -m sentinel_platform.workers transactions``), a real Redis, a real HTTP analyzer
on 127.0.0.1 that rejects the fleet's key (HTTP 401).

What is promised: after the first such answer each worker makes at most one more call
(the one it may have had under way); each logs one ERROR line ``analyzer_exhausted``
naming the cause, not one per message; its metrics say so (``analyzer_calls{outcome=
"exhausted"}``, the ``analyzer_exhausted`` gauge); the breaker never opens for it; and the
messages follow ``SENTINEL_ANALYZER_WHEN_DOWN``: rules verdicts (``fallback``) or pending,
none lost, none dead-lettered.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Any

import pytest

from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.harness.analyzer_server import AnalyzerServer
from sentinel_platform_tests.harness.model_api_server import ModelApiServer
from sentinel_platform_tests.harness.processes import Child, Fleet, child_env, wait_leases
from sentinel_platform_tests.harness.waits import wait_until
from sentinel_platform_tests.workers.processors.test_transactions import BASE
from sentinel_platform_tests.workers.test_analyzer_in_worker import (
    ANALYZER_PASSWORD,
    scrape_samples,
    with_credentials,
)

MESSAGES = 30
WORKERS = 2


def log_entries(worker: Child) -> list[dict[str, Any]]:
    return [json.loads(line) for line in worker.log_text().splitlines() if line.startswith("{")]


def events(worker: Child, name: str) -> list[dict[str, Any]]:
    return [entry for entry in log_entries(worker) if entry.get("event") == name]


def metric(worker: Child, name: str, label: str = "") -> float:
    """The value of the worker's ``sentinel_worker_<name>`` series carrying ``label``."""
    (serving,) = events(worker, "metrics_serving")
    prefix = f"sentinel_worker_{name}"
    (value,) = [
        v
        for k, v in scrape_samples(serving["url"]).items()
        if (k == prefix or k.startswith(prefix + "{")) and label in k
    ]
    return value


def start_fleet(
    fleet: Fleet, settings: Settings, redis_client: RedisClient, url: str, when_down: str
) -> list[Child]:
    env = child_env(
        settings.redis_url_value,
        settings.home_dir,
        analyzer_url=url,
        analyzer_when_down=when_down,
        worker_concurrency=1,  # one call at a time: what is under way is known
    )
    extra = ["--metrics-port", "0"]
    workers = [
        fleet.worker("transactions", f"exhausted-{i}", env, extra=extra) for i in range(WORKERS)
    ]
    wait_leases(redis_client, transaction_keys(settings), workers, timeout_s=60)
    return workers


def add_transactions(redis_client: RedisClient, settings: Settings) -> list[str]:
    keys = transaction_keys(settings)
    ids = [f"txn-exhausted-{i}" for i in range(MESSAGES)]
    pipe = redis_client.pipeline(transaction=False)
    for txn_id in ids:
        pipe.xadd(keys.stream, {"data": json.dumps({**BASE, "id": txn_id, "amount": 497.0})})
    pipe.execute()
    return ids


def assert_one_error_line_per_worker(workers: list[Child]) -> None:
    for line in assert_one_error_line_per_worker_of(*workers, cause="rejected_key"):
        assert line["analyzer"].startswith("http://bot:***@127.0.0.1:")


def assert_one_error_line_per_worker_of(*workers: Child, cause: str) -> list[dict[str, Any]]:
    """At most one ``analyzer_exhausted`` line per worker, at least one in all, each an
    ERROR naming ``cause`` and the worker's stream, group and consumer; the lines."""
    told = [events(worker, "analyzer_exhausted") for worker in workers]
    assert all(len(lines) <= 1 for lines in told), "once per change, not once per message"
    lines = [line for worker_lines in told for line in worker_lines]
    assert lines, "no analyzer_exhausted line"
    for line in lines:
        assert (line["level"], line["cause"]) == ("error", cause), line
        assert line["stream"] and line["group"] and line["consumer"], "whose line it is"
    return lines


def assert_the_fleet_stopped_calling(analyzer_server: AnalyzerServer) -> None:
    # The first 401, plus at most one call per worker that was under way or sent before
    # its worker learnt of the fleet's hold.
    assert 1 <= len(analyzer_server.requests) <= 1 + WORKERS, len(analyzer_server.requests)


def test_a_rejected_key_stops_the_fleet_and_the_rules_decide(
    analyzer_server: AnalyzerServer,
    fleet: Fleet,
    settings: Settings,
    redis_client: RedisClient,
) -> None:
    analyzer_server.mode = "refused"
    keys = transaction_keys(settings)
    workers = start_fleet(
        fleet, settings, redis_client, with_credentials(analyzer_server.url), "rules"
    )
    ids = add_transactions(redis_client, settings)
    wait_until(
        lambda: redis_client.xlen(keys.results) + redis_client.xlen(keys.dlq) == len(ids),
        timeout_s=60,
        what="a verdict or a dead letter for every message",
    )
    assert redis_client.xlen(keys.dlq) == 0
    verdicts = [fields for _, fields in redis_client.xrange(keys.results)]
    assert sorted(v["txn_id"] for v in verdicts) == sorted(ids), "none lost, none twice"
    assert {(v["driver_used"], v["is_threat"]) for v in verdicts} == {("fallback", "true")}
    assert_the_fleet_stopped_calling(analyzer_server)
    exhausted = sum(metric(w, "analyzer_calls_total", 'outcome="exhausted"') for w in workers)
    assert exhausted == len(ids), "every message met the exhaustion (answer or hold)"
    told = [w for w in workers if events(w, "analyzer_exhausted")]
    assert all(metric(w, "analyzer_exhausted") == 1.0 for w in told)
    assert sum(metric(w, "analyzer_calls_total", 'outcome="error"') for w in workers) == 0
    for worker in workers:
        assert worker.stop() == 0, worker.log_tail()
    assert_one_error_line_per_worker(workers)
    for worker in workers:
        assert not events(worker, "analyzer_circuit"), "a rejected key is no outage"
        assert ANALYZER_PASSWORD not in worker.log_text()


def test_a_rejected_key_with_when_down_wait_keeps_every_message_pending(
    analyzer_server: AnalyzerServer,
    fleet: Fleet,
    settings: Settings,
    redis_client: RedisClient,
) -> None:
    analyzer_server.mode = "refused"
    keys = transaction_keys(settings)
    url = with_credentials(analyzer_server.url)
    workers = start_fleet(fleet, settings, redis_client, url, "wait")
    ids = add_transactions(redis_client, settings)

    def held_calls() -> float:
        return sum(
            metric(w, "analyzer_calls_total", 'outcome="exhausted"')
            for w in workers
            if events(w, "metrics_serving")
        )

    # Every worker has met the exhaustion on several messages: they wait, undecided.
    wait_until(lambda: held_calls() >= 2 * WORKERS, timeout_s=60, what="messages held")
    assert redis_client.xlen(keys.results) == 0
    assert redis_client.xlen(keys.dlq) == 0
    assert_the_fleet_stopped_calling(analyzer_server)
    for worker in workers:
        assert worker.stop() == 0, worker.log_tail()
        assert "processing_failed" not in worker.log_text()
    assert_one_error_line_per_worker(workers)
    (group,) = [g for g in redis_client.xinfo_groups(keys.stream) if g["name"] == keys.group]
    assert int(group["pending"]) + int(group["lag"]) == len(ids), group  # none lost
    assert redis_client.xlen(keys.results) == 0 and redis_client.xlen(keys.dlq) == 0


@pytest.mark.parametrize("status", [401, 403])
def test_a_rejected_key_needs_no_second_call_from_one_worker(
    analyzer_server: AnalyzerServer,
    fleet: Fleet,
    settings: Settings,
    redis_client: RedisClient,
    status: int,
) -> None:
    """One worker alone: exactly one call, whatever the number of messages."""
    analyzer_server.mode, analyzer_server.refused_status = "refused", status
    keys = transaction_keys(settings)
    env = child_env(
        settings.redis_url_value,
        settings.home_dir,
        analyzer_url=with_credentials(analyzer_server.url),
        worker_concurrency=1,
    )
    worker = fleet.worker("transactions", f"exhausted-alone-{status}", env)
    wait_leases(redis_client, keys, [worker], timeout_s=60)
    ids = add_transactions(redis_client, settings)
    wait_until(lambda: redis_client.xlen(keys.results) == len(ids), timeout_s=60)
    assert len(analyzer_server.requests) == 1
    assert worker.stop() == 0, worker.log_tail()
    assert_one_error_line_per_worker([worker])


def test_a_late_answer_to_a_call_sent_before_the_quota_ran_out_is_no_recovery(
    model_api_server: ModelApiServer,
    fleet: Fleet,
    settings: Settings,
    redis_client: RedisClient,
) -> None:
    """Two calls are admitted and take their time; the third finds the quota spent and
    is refused at once (OpenAI's 429 ``insufficient_quota``). The two late successes were
    sent before the exhaustion: they must not mark the analyzer recovered, nor lower the
    gauge the alert reads, while the fleet is held (one ERROR line, no flapping)."""
    model_api_server.quota_after, model_api_server.latency_s = 2, 1.0
    keys = transaction_keys(settings)
    env = child_env(
        settings.redis_url_value,
        settings.home_dir,
        analyzer_api="openai",
        analyzer_model="gpt-4o-mini",
        analyzer_url=model_api_server.url,
        worker_concurrency=3,  # three calls at once: two admitted, one refused
    )
    worker = fleet.worker("transactions", "exhausted-late", env, extra=["--metrics-port", "0"])
    wait_leases(redis_client, keys, [worker], timeout_s=60)
    ids = add_transactions(redis_client, settings)
    wait_until(lambda: redis_client.xlen(keys.results) == len(ids), timeout_s=60)
    verdicts = [fields for _, fields in redis_client.xrange(keys.results)]
    assert sum(v["driver_used"] == "analyzer" for v in verdicts) == 2, "the late answers count"
    assert metric(worker, "analyzer_exhausted") == 1.0, "the fleet is still held"
    assert worker.stop() == 0, worker.log_tail()
    assert not events(worker, "analyzer_recovered"), "a late answer is no recovery"
    (told,) = assert_one_error_line_per_worker_of(worker, cause="insufficient_quota")
    # The worker learnt of the refusal when it logged it (to the millisecond): a call that
    # reached the server later was sent after the fleet was held. The thread freed by the
    # first answer may send one more call beside the refused one before the refusal is read.
    known_at = datetime.fromisoformat(told["ts"].replace("Z", "+00:00")).timestamp() + 0.001
    seen = model_api_server.seen()
    assert [call for call in seen if call["at"] > known_at] == [], "no call after the refusal"
    assert 3 <= len(seen) <= 4, len(seen)
