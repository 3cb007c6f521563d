"""Delivery limit, invalid messages, retries, and the atomic DLQ + XACK."""

from __future__ import annotations

import json

import pytest

from sentinel_platform.schemas import DeadLetter
from sentinel_platform.settings import Settings
from sentinel_platform.streams.connection import RedisClient
from sentinel_platform.streams.dead_letter import (
    DEAD_LETTER,
    build_dead_letter,
    queue_dead_letter,
    was_dead_lettered,
)
from sentinel_platform.streams.group import ensure_group
from sentinel_platform.streams.keys import StreamKeys
from sentinel_platform_tests.conftest import wait_until
from sentinel_platform_tests.workers.conftest import StartWorker, pending_of, publish
from sentinel_platform_tests.workers.processors_for_tests import CALLS_KEY


def _dead_letters(client: RedisClient, keys: StreamKeys) -> list[DeadLetter]:
    return [DeadLetter.from_fields(fields) for _id, fields in client.xrange(keys.dlq)]


def _calls(client: RedisClient, key: str) -> int:
    return int(client.hget(CALLS_KEY, key) or 0)


@pytest.mark.parametrize("limit", [1, 3])
def test_poison_message_is_processed_exactly_limit_times_then_dead_lettered(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker, limit: int
) -> None:
    poison = {"key": "poison", "poison": "1", "note": "ünïcode kept"}
    [poison_id] = publish(redis_client, tx_keys, [poison])
    worker = start_worker(env={"SENTINEL_RECLAIM_DELIVERY_LIMIT": str(limit)})

    wait_until(lambda: redis_client.xlen(tx_keys.dlq) == 1, 15)
    [letter] = _dead_letters(redis_client, tx_keys)
    assert _calls(redis_client, "poison") == limit
    assert letter.reason == "max_deliveries_exceeded"
    assert letter.message_id == poison_id
    assert letter.original_fields == poison
    assert "RuntimeError: poison message poison" in letter.error
    assert letter.deliveries == limit + 1
    assert (letter.stream, letter.group, letter.consumer) == (
        tx_keys.stream,
        tx_keys.group,
        worker.consumer,
    )
    assert pending_of(redis_client, tx_keys, worker.consumer) == 0
    assert redis_client.xlen(tx_keys.results) == 0
    # The log line follows the DLQ write: wait for it rather than race it.
    wait_until(lambda: worker.events("dead_lettered"))
    assert len(worker.events("processing_failed")) == limit
    assert len(worker.events("dead_lettered")) == 1


def test_transient_failure_is_retried_after_backoff_and_succeeds_once(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    publish(redis_client, tx_keys, [{"key": "flaky", "fail_times": "2"}])
    worker = start_worker(env={"SENTINEL_RECLAIM_DELIVERY_LIMIT": "3"})
    wait_until(lambda: redis_client.xlen(tx_keys.results) == 1, 15)
    [(_id, result)] = redis_client.xrange(tx_keys.results)
    assert result["call"] == "3"
    assert _calls(redis_client, "flaky") == 3
    assert redis_client.xlen(tx_keys.dlq) == 0
    retries = worker.events("retrying")
    assert [r["deliveries"] for r in retries] == [2, 3]
    # bookkeeping cleared
    assert not list(redis_client.scan_iter(match="sentinel:attempts:transactions*"))


def test_invalid_message_is_dead_lettered_at_once_and_the_worker_keeps_going(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    bad = {"sleep_ms": "soon", "key": "bad"}
    ids = publish(redis_client, tx_keys, [{"key": "before"}, bad, {"key": "after"}])
    worker = start_worker().wait_ready(redis_client)

    wait_until(lambda: redis_client.xlen(tx_keys.results) == 2, 15)
    [letter] = _dead_letters(redis_client, tx_keys)
    assert letter.reason == "invalid_message"
    assert letter.message_id == ids[1]
    assert json.loads(letter.payload) == bad
    assert "sleep_ms" in letter.error and "SchemaError" in letter.error
    assert letter.deliveries == 1
    assert _calls(redis_client, "bad") == 0  # never handed to process()
    assert worker.proc.poll() is None
    publish(redis_client, tx_keys, [{"nokey": "x"}, {"key": "later"}])
    wait_until(lambda: redis_client.xlen(tx_keys.results) == 3, 10)
    wait_until(lambda: redis_client.xlen(tx_keys.dlq) == 2, 10)
    assert pending_of(redis_client, tx_keys, worker.consumer) == 0


def _deliver(client: RedisClient, keys: StreamKeys, consumer: str) -> str:
    ensure_group(client, keys)
    [message_id] = publish(client, keys, [{"key": "k"}])
    client.xreadgroup(keys.group, consumer, {keys.stream: ">"}, count=1)
    return message_id


def _dead_letter_twice(client: RedisClient, keys: StreamKeys, settings: Settings, mid: str) -> list:
    pipe = client.pipeline(transaction=False)
    for consumer in ("racer-a", "racer-b"):
        letter = build_dead_letter(
            keys, mid, {"key": "k"}, "max_deliveries_exceeded", "boom", 4, consumer
        )
        queue_dead_letter(pipe, keys, letter, settings.dlq_maxlen)
    DEAD_LETTER.load(client)
    return pipe.execute()


def test_dead_letter_and_ack_are_one_atomic_step(
    redis_client: RedisClient, tx_keys: StreamKeys, settings: Settings
) -> None:
    message_id = _deliver(redis_client, tx_keys, "holder")
    # Two workers dead-letter the same delivery: exactly one entry, and it is acknowledged.
    replies = _dead_letter_twice(redis_client, tx_keys, settings, message_id)
    assert [was_dead_lettered(r) for r in replies] == [True, False]
    assert redis_client.xlen(tx_keys.dlq) == 1
    assert redis_client.xpending(tx_keys.stream, tx_keys.group)["pending"] == 0
    # A delivery already settled (acked) never produces a dead letter.
    replies = _dead_letter_twice(redis_client, tx_keys, settings, message_id)
    assert replies == [0, 0]
    assert redis_client.xlen(tx_keys.dlq) == 1


def test_dead_letter_stream_is_capped(
    redis_client: RedisClient, tx_keys: StreamKeys, make_settings
) -> None:
    settings = make_settings(dlq_maxlen=100)
    ensure_group(redis_client, tx_keys)
    ids = publish(redis_client, tx_keys, [{"key": str(n)} for n in range(400)])
    redis_client.xreadgroup(tx_keys.group, "holder", {tx_keys.stream: ">"}, count=400)
    pipe = redis_client.pipeline(transaction=False)
    for message_id in ids:
        letter = build_dead_letter(tx_keys, message_id, {}, "invalid_message", "x", 1, "c")
        queue_dead_letter(pipe, tx_keys, letter, settings.dlq_maxlen)
    DEAD_LETTER.load(redis_client)
    pipe.execute()
    assert 100 <= redis_client.xlen(tx_keys.dlq) < 400
    assert redis_client.xpending(tx_keys.stream, tx_keys.group)["pending"] == 0


def test_a_parser_bug_is_retried_like_a_processing_error_not_fatal(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    publish(redis_client, tx_keys, [{"key": "buggy", "parse_bug": "1"}, {"key": "fine"}])
    worker = start_worker(env={"SENTINEL_RECLAIM_DELIVERY_LIMIT": "2"})
    wait_until(lambda: redis_client.xlen(tx_keys.dlq) == 1, 15)
    [letter] = _dead_letters(redis_client, tx_keys)
    assert letter.reason == "max_deliveries_exceeded"
    assert letter.error.startswith("ValueError: a bug in the parser")
    assert redis_client.xlen(tx_keys.results) == 1
    assert worker.proc.poll() is None
