"""With retention off, a worker dead-letters an entry older than its idempotency marker's
TTL instead of applying it (it may be a re-read whose marker has expired): nothing applied
twice, nothing lost; a replay applies it once."""

from __future__ import annotations

import json

from sentinel_platform.schemas import DeadLetter
from sentinel_platform.settings import Settings
from sentinel_platform.streams.operators import dlq_admin
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.processes import StartWorker
from sentinel_platform_tests.harness.processors import CALLS_KEY
from sentinel_platform_tests.harness.waits import wait_until

RETENTION_OFF = {"SENTINEL_STREAM_RETENTION_ENABLED": "false"}


def test_with_retention_off_an_entry_older_than_its_marker_ttl_is_dead_lettered_not_applied(
    redis_client: RedisClient, settings: Settings, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    client, keys = redis_client, tx_keys
    # An entry from 1970 (explicit id), as a stream kept forever would still hold it, read
    # again after its group was recreated at 0; then a fresh one.
    old_id = client.xadd(keys.stream, {"key": "k-old"}, id="1000-0")
    client.xadd(keys.stream, {"key": "k-new"})
    start_worker(env=RETENTION_OFF).wait_ready(client)

    wait_until(lambda: client.xlen(keys.results) == 1 and client.xlen(keys.dlq) == 1, 20)
    [(_, fields)] = client.xrange(keys.dlq)
    letter = DeadLetter.from_fields(fields)
    assert (letter.reason, letter.message_id) == ("expired_marker", old_id)
    assert json.loads(letter.payload) == {"key": "k-old"}  # the whole entry, nothing lost
    assert "SENTINEL_IDEMPOTENCY_TTL_S" in letter.error
    assert "SENTINEL_STREAM_RETENTION_ENABLED" in letter.error
    assert client.hgetall(CALLS_KEY) == {"k-new": "1"}  # never applied
    assert client.xpending(keys.stream, keys.group)["pending"] == 0

    # The operator decides: a replay is a new entry (fresh id), applied once.
    [entry] = dlq_admin.list_entries(client, settings, dlq_admin.DlqFilter())
    assert dlq_admin.replay_one(client, settings, entry).status == "replayed"
    wait_until(lambda: client.xlen(keys.results) == 2, 20)
    assert client.hgetall(CALLS_KEY) == {"k-new": "1", "k-old": "1"}
    assert client.xlen(keys.dlq) == 0
