"""Consuming: pre-group messages, the domain entry points, lag as it really is."""

from __future__ import annotations

import time

from sentinel_platform.schemas import Axiom, Transaction
from sentinel_platform.settings import Settings
from sentinel_platform.streams.connection import RedisClient
from sentinel_platform.streams.keys import StreamKeys, axiom_keys, transaction_keys
from sentinel_platform.streams.lag import read_lag_key
from sentinel_platform_tests.conftest import wait_until
from sentinel_platform_tests.workers.conftest import StartWorker, pending_of, publish


def _transaction(n: int) -> Transaction:
    return Transaction(
        id=f"txn-{n}",
        merchant=f"merchant-{n}",
        category="suspicious" if n % 2 else "grocery",
        currency="USD",
        amount=12.5 + n,
        message="weekly shop",
        source="test",
        timestamp="2026-11-21T10:00:00Z",
    )


def test_messages_published_before_the_group_exists_are_consumed(
    redis_client: RedisClient, settings: Settings, start_worker: StartWorker
) -> None:
    keys = transaction_keys(settings)
    ids = publish(redis_client, keys, [_transaction(n).to_fields() for n in range(20)])
    assert not redis_client.exists(keys.results)

    worker = start_worker("transactions", processor=None).wait_ready(redis_client)

    wait_until(lambda: redis_client.xlen(keys.results) == 20, 15)
    verdicts = [fields for _id, fields in redis_client.xrange(keys.results)]
    assert sorted(v["source_message_id"] for v in verdicts) == sorted(ids)
    assert {v["txn_id"] for v in verdicts} == {f"txn-{n}" for n in range(20)}
    assert {v["is_threat"] for v in verdicts if v["txn_id"] == "txn-1"} == {"true"}
    recent = redis_client.lrange(keys.recent, 0, -1)
    assert len(recent) == 20 and '"txn-19"' in recent[0]  # newest first
    wait_until(lambda: pending_of(redis_client, keys, worker.consumer) == 0)


def test_axiom_worker_writes_one_compliance_event_per_reading(
    redis_client: RedisClient, settings: Settings, start_worker: StartWorker
) -> None:
    keys = axiom_keys(settings)
    axioms = [
        Axiom(
            status="nominal",
            metric_value=1.5,
            anomaly_score=0.1,
            source_id="sensor-1",
            emitted_at=f"2026-11-21T10:00:0{n}Z",
        )
        for n in range(3)
    ]
    # Same sensor, three readings: the natural key includes emitted_at, so all three count.
    publish(redis_client, keys, [a.to_fields() for a in axioms])
    start_worker("axioms", processor=None).wait_ready(redis_client)
    wait_until(lambda: redis_client.xlen(keys.results) == 3, 15)
    events = [fields for _id, fields in redis_client.xrange(keys.results)]
    assert [e["emitted_at"] for e in events] == [a.emitted_at for a in axioms]
    assert all(e["source_id"] == "sensor-1" for e in events)


def _lag(client: RedisClient, keys: StreamKeys) -> int | None:
    return read_lag_key(client, keys)


def test_lag_key_counts_backlog_plus_pending_and_survives_a_slow_message(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    # Lag key TTL is 2 s in FAST_TIMINGS; the first message takes 3 s.
    messages = [{"key": "slow", "sleep_ms": "3000"}] + [{"key": f"m{n}"} for n in range(4)]
    publish(redis_client, tx_keys, messages)
    start_worker(args=["--count", "1"]).wait_ready(redis_client)
    from sentinel_platform_tests.workers.processors_for_tests import CALLS_KEY

    wait_until(lambda: redis_client.hget(CALLS_KEY, "slow"), 10)
    deadline = time.monotonic() + 3.5
    seen = []
    while time.monotonic() < deadline and not redis_client.xlen(tx_keys.results):
        seen.append(_lag(redis_client, tx_keys))
        time.sleep(0.1)
    # While the slow message is in flight: never missing, always 4 backlog + 1 pending.
    assert len(seen) > 20
    assert set(seen) == {5}, seen
    wait_until(lambda: _lag(redis_client, tx_keys) == 0, 10)
    assert redis_client.xlen(tx_keys.results) == 5
