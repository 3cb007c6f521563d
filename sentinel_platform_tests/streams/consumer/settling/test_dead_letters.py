"""The atomic DLQ + XACK and the DLQ cap (the loop's dead-lettering: ``streams/``)."""

from __future__ import annotations

from sentinel_platform.settings import Settings
from sentinel_platform.streams.consumer.group import ensure_group
from sentinel_platform.streams.consumer.settling.dead_letter import (
    DEAD_LETTER,
    build_dead_letter,
    queue_dead_letter,
    was_dead_lettered,
)
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.streams import publish


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
        queue_dead_letter(pipe, keys, letter, settings.dlq_maxlen, settings.idempotency_ttl_s)
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
        queue_dead_letter(pipe, tx_keys, letter, settings.dlq_maxlen, settings.idempotency_ttl_s)
    DEAD_LETTER.load(redis_client)
    pipe.execute()
    assert 100 <= redis_client.xlen(tx_keys.dlq) < 400
    assert redis_client.xpending(tx_keys.stream, tx_keys.group)["pending"] == 0
