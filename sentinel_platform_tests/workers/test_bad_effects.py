"""An effect the client cannot send is a processor failure: retried, then dead-lettered."""

from __future__ import annotations

import pytest

from sentinel_platform.schemas import DeadLetter
from sentinel_platform.streams.connection import RedisClient
from sentinel_platform.streams.idempotency import InvalidEffectError, check_effect
from sentinel_platform.streams.keys import StreamKeys
from sentinel_platform_tests.conftest import wait_until
from sentinel_platform_tests.workers.conftest import StartWorker, publish
from sentinel_platform_tests.workers.processors_for_tests import CALLS_KEY


@pytest.mark.parametrize(
    ("kind", "named"), [("none", "'score'"), ("bool", "'flagged'"), ("dict", "'details'")]
)
def test_an_unsendable_effect_is_retried_then_dead_lettered_and_the_worker_keeps_going(
    redis_client: RedisClient,
    tx_keys: StreamKeys,
    start_worker: StartWorker,
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
    worker = start_worker(env={"SENTINEL_RECLAIM_DELIVERY_LIMIT": "3"})

    wait_until(lambda: redis_client.xlen(tx_keys.dlq) == 1, 20)
    [(_id, fields)] = redis_client.xrange(tx_keys.dlq)
    letter = DeadLetter.from_fields(fields)
    assert (letter.message_id, letter.reason) == (ids[0], "max_deliveries_exceeded")
    assert "InvalidEffectError" in letter.error and named in letter.error
    assert int(redis_client.hget(CALLS_KEY, "bad")) == 3
    wait_until(lambda: redis_client.xlen(tx_keys.results) == 2, 10)
    results = {f["key"]: f for _rid, f in redis_client.xrange(tx_keys.results)}
    assert results["once"]["call"] == "2"  # the second call's good effect was committed
    assert results["fine"]["source_message_id"] == ids[2]
    wait_until(lambda: redis_client.xpending(tx_keys.stream, tx_keys.group)["pending"] == 0)
    assert worker.proc.poll() is None
    worker.terminate()
    assert worker.wait(10) == 0


def test_an_effect_without_result_fields_is_a_processor_failure_not_a_crash(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    [bad_id] = publish(redis_client, tx_keys, [{"key": "empty", "bad_effect": "empty"}])
    worker = start_worker(env={"SENTINEL_RECLAIM_DELIVERY_LIMIT": "2"})
    wait_until(lambda: redis_client.xlen(tx_keys.dlq) == 1, 20)
    letter = DeadLetter.from_fields(redis_client.xrange(tx_keys.dlq)[0][1])
    assert letter.message_id == bad_id
    assert "no fields" in letter.error
    assert worker.proc.poll() is None


@pytest.mark.parametrize(
    ("result", "recent"),
    [
        ({"verdict": "ok"}, None),
        ({"verdict": "ok", "amount": 12.5, "count": 3}, "recent entry"),
        ({"score": 0, "zero": 0.0, "empty": ""}, ""),
    ],
)
def test_effects_of_strings_and_numbers_can_be_committed(result: dict, recent: object) -> None:
    check_effect(result, recent)


@pytest.mark.parametrize(
    ("result", "recent", "message"),
    [
        ({}, None, "no fields"),
        (None, None, "no fields"),
        ({"score": None}, None, "'score' is a NoneType"),
        ({"flagged": True}, None, "'flagged' is a bool"),
        ({"details": {"a": "1"}}, None, "'details' is a dict"),
        ({"tags": ["a"]}, None, "'tags' is a list"),
        ({"raw": b"bytes"}, None, "'raw' is a bytes"),
        ({1: "numeric name"}, None, "name 1 is not a string"),
        ({"verdict": "ok"}, {"not": "a string"}, "recent entry is a dict"),
    ],
)
def test_effects_the_client_cannot_send_are_refused_naming_the_field(
    result: object, recent: object, message: str
) -> None:
    with pytest.raises(InvalidEffectError, match=message):
        check_effect(result, recent)  # type: ignore[arg-type]
