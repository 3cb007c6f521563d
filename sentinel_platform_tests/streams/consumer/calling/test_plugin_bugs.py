"""A plug-in's bug on one message never ends the worker: it is retried, then dead-lettered."""

from __future__ import annotations

from sentinel_platform.schemas import DeadLetter
from sentinel_platform.streams.consumer.group import ensure_group
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.processes import StartWorker
from sentinel_platform_tests.harness.processors import CALLS_KEY
from sentinel_platform_tests.harness.streams import publish
from sentinel_platform_tests.harness.waits import wait_until


def test_natural_key_bug_is_dead_lettered_and_neighbours_are_processed(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    ensure_group(redis_client, tx_keys)
    messages = [{"key": f"good-{n}"} for n in range(10)]
    publish(redis_client, tx_keys, [*messages[:5], {"key": "buggy", "key_bug": "1"}, *messages[5:]])
    worker = start_worker(env={"SENTINEL_RECLAIM_DELIVERY_LIMIT": "2"}).wait_ready(redis_client)

    wait_until(lambda: redis_client.xlen(tx_keys.dlq) == 1, timeout_s=20)
    wait_until(lambda: redis_client.xpending(tx_keys.stream, tx_keys.group)["pending"] == 0)

    assert worker.proc.poll() is None, worker.text()
    [(_id, fields)] = redis_client.xrange(tx_keys.dlq)
    letter = DeadLetter.from_fields(fields)
    assert letter.reason == "max_deliveries_exceeded"
    assert "natural key" in letter.error
    assert redis_client.xlen(tx_keys.results) == 10  # every neighbour committed once
    assert {k for k in redis_client.hkeys(CALLS_KEY)} >= {m["key"] for m in messages}
