"""Entries whose bytes are not UTF-8: dead-lettered with their exact bytes, never fatal.

Any client (a Sentinel-L7 producer, ``redis-cli``) can XADD bytes that are not UTF-8.
The pool must dead-letter such an entry at once as invalid, keep its exact bytes
recoverable from the DLQ, process its neighbours and keep every worker alive.
"""

from __future__ import annotations

import base64
import json
import subprocess
import sys

import redis

from sentinel_platform.schemas import DeadLetter
from sentinel_platform.settings import Settings
from sentinel_platform.streams.consumer.group import ensure_group
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.processes import StartWorker
from sentinel_platform_tests.harness.processors import CALLS_KEY
from sentinel_platform_tests.harness.streams import publish
from sentinel_platform_tests.harness.waits import wait_until

BAD_VALUE = b"\xff\xfe not utf-8 \xc3"
BAD_NAME = b"\x80field"


def _raw(settings: Settings) -> redis.Redis:
    """A client that sends and returns bytes as they are, as another producer would."""
    return redis.Redis.from_url(settings.redis_url_value)


def test_undecodable_entry_is_dead_lettered_and_its_neighbours_processed(
    redis_client: RedisClient, tx_keys: StreamKeys, settings: Settings, start_worker: StartWorker
) -> None:
    ensure_group(redis_client, tx_keys)
    publish(redis_client, tx_keys, [{"key": f"before-{n}"} for n in range(20)])
    raw = _raw(settings)
    bad_id = raw.xadd(tx_keys.stream, {b"key": BAD_VALUE, BAD_NAME: b"x"}).decode()
    publish(redis_client, tx_keys, [{"key": f"after-{n}"} for n in range(20)])
    workers = [start_worker().wait_ready(redis_client), start_worker().wait_ready(redis_client)]

    wait_until(lambda: redis_client.hlen(CALLS_KEY) == 40 and redis_client.xlen(tx_keys.dlq) == 1)
    wait_until(lambda: redis_client.xpending(tx_keys.stream, tx_keys.group)["pending"] == 0)

    assert all(w.proc.poll() is None for w in workers), [w.text() for w in workers]
    [(_entry_id, fields)] = redis_client.xrange(tx_keys.dlq)
    letter = DeadLetter.from_fields(fields)
    assert letter.message_id == bad_id
    assert letter.reason == "invalid_message"
    assert "UTF-8" in letter.error
    assert letter.payload_encoding == "base64"
    assert letter.original_bytes() == {b"key": BAD_VALUE, BAD_NAME: b"x"}
    assert all(int(v) == 1 for v in redis_client.hvals(CALLS_KEY))  # each processed once
    assert not any("Traceback" in w.text() for w in workers)


def test_dead_lettered_bytes_are_shown_and_replayed_exactly(
    redis_client: RedisClient,
    tx_keys: StreamKeys,
    settings: Settings,
    settings_env: dict[str, str],
    start_worker: StartWorker,
) -> None:
    ensure_group(redis_client, tx_keys)
    _raw(settings).xadd(tx_keys.stream, {b"key": BAD_VALUE})
    start_worker().wait_ready(redis_client)
    wait_until(lambda: redis_client.xlen(tx_keys.dlq) == 1)
    [(dlq_id, _fields)] = redis_client.xrange(tx_keys.dlq)

    shown = subprocess.run(
        [sys.executable, "-m", "sentinel_platform.cli.main", "dlq", "show", dlq_id, "--json"],
        env=settings_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert shown.returncode == 0, shown.stderr
    out = json.loads(shown.stdout)
    assert out["payload_encoding"] == "base64"
    assert json.loads(out["payload_raw"]) == {
        base64.b64encode(b"key").decode(): base64.b64encode(BAD_VALUE).decode()
    }, out
    assert out["payload"] == {"key": BAD_VALUE.decode("utf-8", "backslashreplace")}

    replayed = subprocess.run(
        [sys.executable, "-m", "sentinel_platform.cli.main", "dlq", "replay", dlq_id, "--json"],
        env=settings_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert replayed.returncode == 0, replayed.stderr
    [outcome] = json.loads(replayed.stdout)
    [(_id, fields)] = _raw(settings).xrange(tx_keys.stream, min=outcome["new_id"], max="+")
    assert fields[b"key"] == BAD_VALUE  # the exact bytes are back on the stream
