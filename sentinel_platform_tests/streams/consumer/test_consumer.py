"""The consumer loop in-process: passes and their reports, burst runs, exactly-once commits,
duplicates, a group deleted under the worker, replies matched to what queued them, and a
stop mid-batch."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping
from typing import Any

import pytest

from sentinel_platform.streams.consumer.loop import Delivery, IterationReport, read_block
from sentinel_platform.streams.consumer.processor import Effect, Processor
from sentinel_platform.streams.consumer.settling import outbox as outbox_module
from sentinel_platform.streams.consumer.settling.attempts import queue_error as queue_error_today
from sentinel_platform.streams.consumer.settling.attempts import read_attempts
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import HANDBACK_CONSUMER, StreamKeys, attempt_key
from sentinel_platform_tests.harness.consumers import MakeConsumer
from sentinel_platform_tests.harness.processors import CALLS_KEY
from sentinel_platform_tests.harness.streams import one_batch, pending_of, publish

Events = Callable[[str], list[logging.LogRecord]]


def _results(client: RedisClient, keys: StreamKeys) -> list[dict[str, str]]:
    entries: Any = client.xrange(keys.results)
    return [fields for _id, fields in entries]


def test_a_burst_run_commits_every_message_exactly_once_and_returns(
    redis_client: RedisClient, tx_keys: StreamKeys, make_consumer: MakeConsumer
) -> None:
    ids = publish(redis_client, tx_keys, [{"key": f"m{n}"} for n in range(50)])
    consumer = make_consumer(count=20)

    assert consumer.run(burst=True) == 0

    results = _results(redis_client, tx_keys)
    assert sorted(r["source_message_id"] for r in results) == sorted(ids)
    calls = redis_client.hgetall(CALLS_KEY)
    assert calls == {f"m{n}": "1" for n in range(50)}
    assert consumer.totals == IterationReport(read=50, committed=50)
    assert redis_client.xpending(tx_keys.stream, tx_keys.group)["pending"] == 0
    assert consumer.metrics.snapshot()["processed"] == 50
    # Nothing left: a second worker's burst finds no work and changes nothing.
    again = make_consumer("c2")
    assert again.run(burst=True) == 0
    assert again.totals == IterationReport()
    assert redis_client.xlen(tx_keys.results) == 50


def test_each_pass_reports_what_it_handled(
    redis_client: RedisClient, tx_keys: StreamKeys, make_consumer: MakeConsumer
) -> None:
    publish(redis_client, tx_keys, [{"key": "a"}, {"key": "b"}, {"key": "a"}, {"nokey": "x"}])
    consumer = make_consumer(count=10, block_ms=0)
    consumer.start()

    first = one_batch(consumer)
    second = consumer.iteration()

    assert first == IterationReport(read=4, committed=2, duplicates=1, dead_lettered=1)
    assert (first.handled, first.idle) == (4, False)
    assert second == IterationReport() and second.idle
    assert consumer.shutdown() == 0


def test_the_same_record_published_twice_has_one_effect(
    redis_client: RedisClient, tx_keys: StreamKeys, make_consumer: MakeConsumer, events: Events
) -> None:
    publish(redis_client, tx_keys, [{"key": "same"}, {"key": "other"}, {"key": "same"}])
    consumer = make_consumer()
    consumer.run(burst=True)
    assert len(events("duplicate_ack")) == 1
    assert consumer.totals.duplicates == 1
    assert pending_of(redis_client, tx_keys, consumer.consumer) == 0
    assert sorted(f["key"] for f in _results(redis_client, tx_keys)) == ["other", "same"]
    assert redis_client.xpending(tx_keys.stream, tx_keys.group)["pending"] == 0


def test_a_group_deleted_under_the_worker_is_recreated_and_nothing_is_lost(
    redis_client: RedisClient, tx_keys: StreamKeys, make_consumer: MakeConsumer, events: Events
) -> None:
    publish(redis_client, tx_keys, [{"key": f"before{n}"} for n in range(3)])
    consumer = make_consumer(block_ms=0)
    consumer.start()
    assert one_batch(consumer).committed == 3
    redis_client.xgroup_destroy(tx_keys.stream, tx_keys.group)  # e.g. an operator's mistake
    publish(redis_client, tx_keys, [{"key": f"after{n}"} for n in range(2)])

    consumer.run(burst=True)  # its first pass meets NOGROUP

    [missing] = events("group_missing")
    assert "NOGROUP" in missing.__dict__["error"]
    groups = redis_client.xinfo_groups(tx_keys.stream)
    assert [g["name"] for g in groups] == [tx_keys.group]
    # Recreated at 0: every entry read again, the old ones acknowledged as duplicates.
    keys = sorted(f["key"] for f in _results(redis_client, tx_keys))
    assert keys == ["after0", "after1", "before0", "before1", "before2"]
    assert consumer.totals.healed == 1
    assert consumer.totals.duplicates == 3
    assert redis_client.xpending(tx_keys.stream, tx_keys.group)["pending"] == 0


# --- replies matched to the operation that queued them ---------------------------------------


def _error_in_one_command(
    pipe: Any, keys: StreamKeys, message_id: str, error: str, ttl: int
) -> None:
    pipe.eval(
        "redis.call('HSET', KEYS[1], 'err', ARGV[1]) return redis.call('EXPIRE', KEYS[1], ARGV[2])",
        1,
        attempt_key(keys, message_id),
        error,
        ttl,
    )


def _error_in_three_commands(
    pipe: Any, keys: StreamKeys, message_id: str, error: str, ttl: int
) -> None:
    record = attempt_key(keys, message_id)
    pipe.hset(record, "err", error)
    pipe.hset(record, "failed_at", "now")
    pipe.expire(record, ttl)


@pytest.mark.parametrize(
    "queue_error",
    [queue_error_today, _error_in_one_command, _error_in_three_commands],
    ids=["as_today", "one_command", "three_commands"],
)
def test_replies_are_read_by_the_operation_that_queued_them_whatever_it_queues(
    redis_client: RedisClient,
    tx_keys: StreamKeys,
    make_consumer: MakeConsumer,
    events: Events,
    monkeypatch: pytest.MonkeyPatch,
    queue_error: Callable[..., None],
) -> None:
    monkeypatch.setattr(outbox_module, "queue_error", queue_error)
    consumer = make_consumer(block_ms=0)
    consumer.start()
    ids = publish(
        redis_client, tx_keys, [{"key": "p", "poison": "1"}, {"nokey": "x"}, {"key": "ok"}]
    )
    read: Any = redis_client.xreadgroup(tx_keys.group, consumer.consumer, {tx_keys.stream: ">"})
    batch = [Delivery(mid, fields, 1) for _s, entries in read for mid, fields in entries]
    # The invalid one is settled elsewhere before we commit: its dead letter must be stale.
    redis_client.xack(tx_keys.stream, tx_keys.group, ids[1])

    consumer.handle(batch)

    assert consumer.metrics.snapshot()["dead_lettered"] == 0
    assert redis_client.xlen(tx_keys.dlq) == 0
    assert [r.__dict__["message_id"] for r in events("stale_dead_letter")] == [ids[1]]
    assert "poison message p" in (
        read_attempts(redis_client, tx_keys, [ids[0]])[ids[0]].last_error or ""
    )
    assert [f["key"] for f in _results(redis_client, tx_keys)] == ["ok"]
    assert consumer.metrics.snapshot()["processed"] == 1
    consumer.stop.set()
    consumer.shutdown()


class _StopsAfterFirst:
    """Wraps a processor: asks the consumer to stop while its first message is in hand."""

    name = "stops-after-first"

    def __init__(self, stop: threading.Event, inner: Processor) -> None:
        self.stop, self.inner = stop, inner

    def parse(self, fields: Mapping[str, str]) -> Any:
        return self.inner.parse(fields)

    def natural_key(self, message: Any) -> str:
        return self.inner.natural_key(message)

    def process(self, message: Any) -> Effect:
        self.stop.set()  # as SIGTERM does, mid-batch
        return self.inner.process(message)


def test_a_stop_mid_batch_finishes_the_message_in_hand_and_hands_the_rest_back(
    redis_client: RedisClient, tx_keys: StreamKeys, make_consumer: MakeConsumer
) -> None:
    ids = publish(redis_client, tx_keys, [{"key": f"m{n}"} for n in range(5)])
    stop = threading.Event()
    stopping = make_consumer(
        "stopping", block_ms=0, stop=stop, wrap=lambda inner: _StopsAfterFirst(stop, inner)
    )
    stopping.start()

    assert one_batch(stopping) == IterationReport(read=5, committed=1, handed_back=4)
    assert stopping.shutdown() == 0

    pending: Any = redis_client.xpending_range(tx_keys.stream, tx_keys.group, "-", "+", 10)
    assert [p["message_id"] for p in pending] == ids[1:]
    assert {p["consumer"] for p in pending} == {HANDBACK_CONSUMER}
    assert {p["times_delivered"] for p in pending} == {0}  # the unprocessed delivery undone
    survivor = make_consumer("survivor")
    assert survivor.run(burst=True) == 0
    assert survivor.totals == IterationReport(recovered=4, committed=4)
    assert redis_client.hgetall(CALLS_KEY) == {f"m{n}": "1" for n in range(5)}


class _EffectForAnotherKey:
    """Builds every effect under a key that is not the message's: a processor bug."""

    name = "wrong-key"

    def parse(self, fields: Mapping[str, str]) -> dict[str, str]:
        return dict(fields)

    def natural_key(self, message: dict[str, str]) -> str:
        return message["key"]

    def process(self, message: dict[str, str]) -> Effect:
        return Effect(f"{message['key']}-other", {"key": message["key"]})


def effect_for_another_key(_settings: Any) -> _EffectForAnotherKey:
    return _EffectForAnotherKey()


def test_an_effect_built_for_another_key_is_a_processor_failure_and_commits_nothing(
    redis_client: RedisClient, tx_keys: StreamKeys, make_consumer: MakeConsumer, events: Events
) -> None:
    publish(redis_client, tx_keys, [{"key": "a"}])
    consumer = make_consumer(processor=f"{__name__}:effect_for_another_key", block_ms=0)
    consumer.start()

    report = one_batch(consumer)

    assert report.committed == 0
    assert redis_client.xlen(tx_keys.results) == 0
    assert not redis_client.exists(tx_keys.marker("a"), tx_keys.marker("a-other"))
    [failed] = events("processing_failed")
    assert "natural key 'a-other' is not the message's 'a'" in failed.__dict__["error"]
    assert pending_of(redis_client, tx_keys, consumer.consumer) == 1  # retried, then DLQ
    consumer.shutdown()


@pytest.mark.parametrize(
    ("block_ms", "waiting", "due_in_s", "expected"),
    [
        (5000, False, None, 1000),  # never past MAX_BLOCK_MS: recovery runs every second
        (200, False, None, 200),
        (200, True, None, None),  # calls or recovered messages wait: no block
        (0, False, None, None),  # --block-ms 0: poll
        (5000, False, 0.25, 250),  # a parked message is due in 250 ms
        (5000, False, 0.0, 1),  # due now: the shortest block, never "forever" (0)
    ],
)
def test_a_read_blocks_only_while_nothing_waits(
    block_ms: int, waiting: bool, due_in_s: float | None, expected: int | None
) -> None:
    assert read_block(block_ms, waiting, due_in_s) == expected
