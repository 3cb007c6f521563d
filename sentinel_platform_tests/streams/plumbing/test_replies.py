"""Typed reply views: what a decoding client returns from the real server fits them."""

from __future__ import annotations

import redis

from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient, resolve_url
from sentinel_platform.streams.plumbing.replies import (
    entries,
    field_args,
    optional_text,
    pending_rows,
    text,
    text_dict,
)


def test_stream_entries_are_text_ids_and_fields(redis_client: RedisClient) -> None:
    written = {"data": '{"merchant": "Café Ünïcode"}', "n": "7"}
    entry_id = text(redis_client.xadd("replies:stream", field_args(written)))
    rows = entries(redis_client.xrange("replies:stream", "-", "+"))
    assert rows == [(entry_id, written)]
    assert all(isinstance(part, str) for part in (rows[0][0], *rows[0][1], *rows[0][1].values()))
    assert entries(redis_client.xrevrange("replies:absent", "+", "-")) == []


def test_hash_replies_become_text_dicts(redis_client: RedisClient) -> None:
    redis_client.hset("replies:hash", mapping=field_args({"a": "1", "b": "ü"}))
    assert text_dict(redis_client.hgetall("replies:hash")) == {"a": "1", "b": "ü"}
    assert text_dict(redis_client.hgetall("replies:absent")) == {}
    assert optional_text(redis_client.get("replies:absent")) is None


def test_raw_client_bytes_are_decoded_as_utf8(
    redis_client: RedisClient, settings: Settings
) -> None:
    redis_client.hset("replies:raw", mapping=field_args({"k": "ü"}))
    raw = redis.Redis.from_url(resolve_url(settings))  # no decode_responses: bytes replies
    try:
        reply = raw.hgetall("replies:raw")
        assert reply == {b"k": "ü".encode()}
        assert text_dict(reply) == {"k": "ü"}
        assert text(raw.hget("replies:raw", "k") or b"") == "ü"
    finally:
        raw.close()


def test_pending_rows_name_message_and_consumer(redis_client: RedisClient) -> None:
    entry_id = text(redis_client.xadd("replies:pel", field_args({"f": "v"})))
    redis_client.xgroup_create("replies:pel", "g", id="0")
    redis_client.xreadgroup("g", "c1", {"replies:pel": ">"}, count=1)
    rows = pending_rows(redis_client.xpending_range("replies:pel", "g", "-", "+", 10))
    assert [(row["message_id"], row["consumer"], row["times_delivered"]) for row in rows] == [
        (entry_id, "c1", 1)
    ]
