"""Poison, invalid and unsendable messages in-process: retries, the delivery limit, and
dead letters that carry the full payload."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from typing import Any

import pytest

from sentinel_platform.schemas import DeadLetter
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.consumers import MakeConsumer
from sentinel_platform_tests.harness.processors import CALLS_KEY
from sentinel_platform_tests.harness.streams import one_batch, pending_of, publish

Events = Callable[[str], list[logging.LogRecord]]


def _dead_letters(client: RedisClient, keys: StreamKeys) -> list[DeadLetter]:
    entries: Any = client.xrange(keys.dlq)
    return [DeadLetter.from_fields(fields) for _id, fields in entries]


def _results(client: RedisClient, keys: StreamKeys) -> list[dict[str, str]]:
    entries: Any = client.xrange(keys.results)
    return [fields for _id, fields in entries]


def _calls(client: RedisClient, key: str) -> int:
    return int(client.hget(CALLS_KEY, key) or 0)


def _nothing_pending(client: RedisClient, keys: StreamKeys) -> bool:
    summary: Any = client.xpending(keys.stream, keys.group)
    return int(summary["pending"]) == 0


@pytest.mark.parametrize("limit", [1, 3])
def test_poison_message_is_processed_exactly_limit_times_then_dead_lettered(
    redis_client: RedisClient,
    tx_keys: StreamKeys,
    make_consumer: MakeConsumer,
    events: Events,
    limit: int,
) -> None:
    poison = {"key": "poison", "poison": "1", "note": "ünïcode kept"}
    [poison_id] = publish(redis_client, tx_keys, [poison])
    consumer = make_consumer(reclaim_delivery_limit=limit)

    assert consumer.run(burst=True) == 0

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
        consumer.consumer,
    )
    assert pending_of(redis_client, tx_keys, consumer.consumer) == 0
    assert _nothing_pending(redis_client, tx_keys)
    assert redis_client.xlen(tx_keys.results) == 0
    assert len(events("processing_failed")) == limit
    assert len(events("dead_lettered")) == 1
    assert (consumer.totals.failed, consumer.totals.dead_lettered) == (limit, 1)


def test_transient_failure_is_retried_after_backoff_and_succeeds_once(
    redis_client: RedisClient, tx_keys: StreamKeys, make_consumer: MakeConsumer, events: Events
) -> None:
    publish(redis_client, tx_keys, [{"key": "flaky", "fail_times": "2"}])
    consumer = make_consumer(reclaim_delivery_limit=3)

    consumer.run(burst=True)

    [result] = _results(redis_client, tx_keys)
    assert result["call"] == "3"
    assert _calls(redis_client, "flaky") == 3
    assert redis_client.xlen(tx_keys.dlq) == 0
    assert [r.__dict__["deliveries"] for r in events("retrying")] == [2, 3]
    assert consumer.totals.failed == 2 and consumer.totals.committed == 1
    # bookkeeping cleared
    assert not list(redis_client.scan_iter(match="sentinel:attempts:transactions*"))


def test_invalid_message_is_dead_lettered_at_once_and_the_worker_keeps_going(
    redis_client: RedisClient, tx_keys: StreamKeys, make_consumer: MakeConsumer
) -> None:
    bad = {"sleep_ms": "soon", "key": "bad"}
    ids = publish(redis_client, tx_keys, [{"key": "before"}, bad, {"key": "after"}])
    consumer = make_consumer(block_ms=0)
    consumer.start()

    report = one_batch(consumer)

    assert (report.committed, report.dead_lettered) == (2, 1)
    assert redis_client.xlen(tx_keys.results) == 2
    [letter] = _dead_letters(redis_client, tx_keys)
    assert letter.reason == "invalid_message"
    assert letter.message_id == ids[1]
    assert json.loads(letter.payload) == bad
    assert "sleep_ms" in letter.error and "SchemaError" in letter.error
    assert letter.deliveries == 1
    assert _calls(redis_client, "bad") == 0  # never handed to process()
    publish(redis_client, tx_keys, [{"nokey": "x"}, {"key": "later"}])
    assert consumer.run(burst=True) == 0
    assert redis_client.xlen(tx_keys.results) == 3
    assert redis_client.xlen(tx_keys.dlq) == 2
    assert pending_of(redis_client, tx_keys, consumer.consumer) == 0
    assert _nothing_pending(redis_client, tx_keys)


def test_a_parser_bug_is_retried_like_a_processing_error_not_fatal(
    redis_client: RedisClient, tx_keys: StreamKeys, make_consumer: MakeConsumer
) -> None:
    publish(redis_client, tx_keys, [{"key": "buggy", "parse_bug": "1"}, {"key": "fine"}])
    consumer = make_consumer(reclaim_delivery_limit=2)
    assert consumer.run(burst=True) == 0
    [letter] = _dead_letters(redis_client, tx_keys)
    assert letter.reason == "max_deliveries_exceeded"
    assert letter.error.startswith("ValueError: a bug in the parser")
    assert redis_client.xlen(tx_keys.results) == 1


@pytest.mark.parametrize(
    ("kind", "named"), [("none", "'score'"), ("bool", "'flagged'"), ("dict", "'details'")]
)
def test_an_unsendable_effect_is_retried_then_dead_lettered_and_the_worker_keeps_going(
    redis_client: RedisClient,
    tx_keys: StreamKeys,
    make_consumer: MakeConsumer,
    kind: str,
    named: str,
) -> None:
    ids = publish(
        redis_client,
        tx_keys,
        [
            {"key": "bad", "bad_effect": kind},
            {"key": "once", "bad_effect": kind, "bad_times": "1"},
            {"key": "fine"},
        ],
    )
    consumer = make_consumer(reclaim_delivery_limit=3)

    assert consumer.run(burst=True) == 0

    [letter] = _dead_letters(redis_client, tx_keys)
    assert (letter.message_id, letter.reason) == (ids[0], "max_deliveries_exceeded")
    assert "InvalidEffectError" in letter.error and named in letter.error
    assert _calls(redis_client, "bad") == 3
    results = {f["key"]: f for f in _results(redis_client, tx_keys)}
    assert len(results) == 2
    assert results["once"]["call"] == "2"  # the second call's good effect was committed
    assert results["fine"]["source_message_id"] == ids[2]
    assert _nothing_pending(redis_client, tx_keys)


def test_an_effect_without_result_fields_is_a_processor_failure_not_a_crash(
    redis_client: RedisClient, tx_keys: StreamKeys, make_consumer: MakeConsumer
) -> None:
    [bad_id] = publish(redis_client, tx_keys, [{"key": "empty", "bad_effect": "empty"}])
    consumer = make_consumer(reclaim_delivery_limit=2)
    assert consumer.run(burst=True) == 0
    [letter] = _dead_letters(redis_client, tx_keys)
    assert letter.message_id == bad_id
    assert "no fields" in letter.error
