"""One paid call per key across the fleet: copies of a transaction read by different
workers at the same moment make one analyzer call between them.

Real worker processes (``python -m sentinel_platform.workers transactions``) with
``SENTINEL_ANALYZER_URL`` at the harness's stub analyzer, a real Redis. A key is claimed
before its call (``Claims``); a copy on another worker waits for the claimant's commit and
is acknowledged without a call; a claimant that dies lets its claim lapse with its lease.

A claimant whose call *failed* holds no claim while the message waits out its retry
backoff: a copy elsewhere may then call, but the retry itself goes through the claim, so
the key still gets one call after the failure, not two (the harness's ``paid_counting``
processor, which names the process of every call).
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any

from sentinel_platform.settings import Settings
from sentinel_platform.streams.consumer.calling.claims import claim_key
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.harness.analyzer_stub import AnalyzerStub
from sentinel_platform_tests.harness.processes import (
    Fleet,
    StartWorker,
    WorkerProcess,
    child_env,
    wait_leases,
)
from sentinel_platform_tests.harness.processors import CALLERS_KEY, CALLS_KEY
from sentinel_platform_tests.harness.streams import publish
from sentinel_platform_tests.harness.waits import wait_until
from sentinel_platform_tests.workers.processors.test_transactions import BASE

KEYS = 24
COPIES = 3
PAID = "sentinel_platform_tests.harness.processors:paid_counting"
#: A retry backoff of many lease TTLs (FAST_TIMINGS: 1 s): a claim left alone lapses in it.
LONG_BACKOFF = {"SENTINEL_RETRY_BACKOFF_MS": "6000"}
#: Keeps the first worker's only call slot busy, so the copy can only go to the second.
BLOCKER_MS = 20_000


def _entries(prefix: str, keys: int, copies: int) -> list[dict[str, str]]:
    """``copies`` copies of ``keys`` transactions, interleaved as a re-published batch is."""
    return [
        {"data": json.dumps({**BASE, "id": f"{prefix}-{n}"})}
        for _copy in range(copies)
        for n in range(keys)
    ]


def _start(fleet: Fleet, settings: Settings, url: str, name: str, **extra: Any) -> WorkerProcess:
    env = child_env(settings.redis_url_value, settings.home_dir, analyzer_url=url, **extra)
    return fleet.worker("transactions", name, env)


def test_copies_on_three_workers_make_one_analyzer_call_per_key(
    fleet: Fleet, settings: Settings, redis_client: RedisClient
) -> None:
    keys = transaction_keys(settings)
    with AnalyzerStub(0.3) as stub:
        workers = [
            _start(fleet, settings, stub.url, f"claims-{n}", worker_concurrency=8) for n in range(3)
        ]
        wait_leases(redis_client, keys, workers, timeout_s=60)
        entries = _entries("copy", KEYS, COPIES)
        pipe = redis_client.pipeline(transaction=True)  # every worker wakes to the batch
        for fields in entries:
            pipe.xadd(keys.stream, fields)
        pipe.execute()

        def settled() -> bool:
            summary = redis_client.xpending(keys.stream, keys.group)
            return redis_client.xlen(keys.results) == KEYS and summary["pending"] == 0

        wait_until(settled, 90, what="one verdict per key, nothing pending")
        calls = stub.calls_per_key()
    assert sum(calls.values()) == KEYS, calls  # 24 paid calls for 72 messages
    assert set(calls) == {f"copy-{n}" for n in range(KEYS)}
    verdicts = [fields for _id, fields in redis_client.xrange(keys.results)]
    assert {v["driver_used"] for v in verdicts} == {"analyzer"}
    assert redis_client.xlen(keys.dlq) == 0
    # each commit deleted its key's claim: none is left to lapse
    assert list(redis_client.scan_iter(match=claim_key(keys, "*"))) == []


def test_a_claim_lapses_with_its_dead_holder_and_a_survivor_calls(
    fleet: Fleet, settings: Settings, redis_client: RedisClient
) -> None:
    keys = transaction_keys(settings)
    with AnalyzerStub(30.0) as slow, AnalyzerStub(0.05) as fast:
        doomed = _start(fleet, settings, slow.url, "claims-doomed")
        wait_leases(redis_client, keys, [doomed], timeout_s=60)
        [entry] = _entries("lapse", 1, 1)
        redis_client.xadd(keys.stream, entry)
        wait_until(lambda: slow.counters()["calls"] == 1, 30, what="the doomed worker's call")
        survivor = _start(fleet, settings, fast.url, "claims-survivor")
        wait_leases(redis_client, keys, [survivor], timeout_s=60)
        redis_client.xadd(keys.stream, entry)  # a copy, while the first call runs
        os.kill(doomed.pid, signal.SIGKILL)
        wait_until(lambda: redis_client.xlen(keys.results) == 1, 60, what="the survivor's verdict")
        wait_until(lambda: redis_client.xpending(keys.stream, keys.group)["pending"] == 0, 60)
        assert fast.calls_per_key() == {"lapse-0": 1}
    [(_id, verdict)] = redis_client.xrange(keys.results)
    assert verdict["driver_used"] == "analyzer"


def test_a_failed_calls_retry_backoff_lets_a_copy_call_but_never_a_second_time(
    start_worker: StartWorker, settings: Settings, redis_client: RedisClient
) -> None:
    keys = transaction_keys(settings)
    first = start_worker(consumer="paid-1", processor=PAID, env=LONG_BACKOFF)
    first.wait_ready(redis_client)
    publish(redis_client, keys, [{"key": "k", "fail_times": "1"}])
    wait_until(lambda: first.events("processing_failed"), 30, what="the first call fails")
    # One call at a time (FAST_TIMINGS): the blocker's call leaves it no room to read.
    publish(redis_client, keys, [{"key": "blocker", "sleep_ms": str(BLOCKER_MS)}])
    wait_until(lambda: redis_client.hget(CALLS_KEY, "blocker") == "1", 30, what="blocked")
    second = start_worker(consumer="paid-2", processor=PAID, env=LONG_BACKOFF)
    second.wait_ready(redis_client)
    publish(redis_client, keys, [{"key": "k"}])  # a copy, while the failed one backs off

    wait_until(lambda: redis_client.xlen(keys.results) == 2, 60, what="k and the blocker")
    wait_until(lambda: redis_client.xpending(keys.stream, keys.group)["pending"] == 0, 60)
    callers = [c for c in redis_client.lrange(CALLERS_KEY, 0, -1) if c.startswith("k:")]
    # The failed call, then the copy's on the second worker: the claim had lapsed during
    # the backoff. The first worker's retry found the copy's commit and made no call.
    assert callers == [f"k:{first.pid}", f"k:{second.pid}"]
    assert redis_client.hget(CALLS_KEY, "k") == "2"
    # its log line may follow the acknowledgement the wait above saw
    wait_until(lambda: first.events("duplicate_ack"), 30, what="the retry's duplicate_ack")
    assert [e["natural_key"] for e in first.events("duplicate_ack")] == ["k"]
    assert redis_client.xlen(keys.dlq) == 0
