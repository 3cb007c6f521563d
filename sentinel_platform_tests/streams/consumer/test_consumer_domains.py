"""The domain processors the worker entry points run by default, driven in-process."""

from __future__ import annotations

from typing import Any

from sentinel_platform.registry import AXIOMS, TRANSACTIONS
from sentinel_platform.schemas import Axiom
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import axiom_keys, transaction_keys
from sentinel_platform_tests.harness.consumers import MakeConsumer
from sentinel_platform_tests.harness.streams import pending_of, publish, sample_transaction


def test_messages_published_before_the_group_exists_are_consumed(
    redis_client: RedisClient, settings: Settings, make_consumer: MakeConsumer
) -> None:
    keys = transaction_keys(settings)
    ids = publish(redis_client, keys, [sample_transaction(n).to_fields() for n in range(20)])
    assert not redis_client.exists(keys.results)

    consumer = make_consumer(processor=TRANSACTIONS.processor)
    assert consumer.run(burst=True) == 0

    entries: Any = redis_client.xrange(keys.results)
    verdicts = [fields for _id, fields in entries]
    assert len(verdicts) == 20
    assert sorted(v["source_message_id"] for v in verdicts) == sorted(ids)
    assert {v["txn_id"] for v in verdicts} == {f"txn-{n}" for n in range(20)}
    assert {v["is_threat"] for v in verdicts if v["txn_id"] == "txn-1"} == {"true"}
    assert keys.recent
    recent: Any = redis_client.lrange(keys.recent, 0, -1)
    assert len(recent) == 20 and '"txn-19"' in recent[0]  # newest first
    assert pending_of(redis_client, keys, consumer.consumer) == 0


def test_axiom_worker_writes_one_compliance_event_per_reading(
    redis_client: RedisClient, settings: Settings, make_consumer: MakeConsumer
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
    consumer = make_consumer(processor=AXIOMS.processor, keys_for=axiom_keys)
    assert consumer.run(burst=True) == 0
    entries: Any = redis_client.xrange(keys.results)
    events = [fields for _id, fields in entries]
    assert [e["emitted_at"] for e in events] == [a.emitted_at for a in axioms]
    assert all(e["source_id"] == "sensor-1" for e in events)
