"""A consumer group deleted and re-created replays its history: dead letters stay single.

After ``XGROUP DESTROY`` the worker re-creates the group at 0 and reads the retained
entries again. Effects are idempotent by their markers; dead letters must be too: a
message already dead-lettered is acknowledged without a second DLQ entry and is never
handed to the processor again.
"""

from __future__ import annotations

from sentinel_platform.streams.consumer.group import ensure_group
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.processes import StartWorker
from sentinel_platform_tests.harness.processors import CALLS_KEY
from sentinel_platform_tests.harness.streams import publish
from sentinel_platform_tests.harness.waits import wait_until


def _caught_up(client: RedisClient, keys: StreamKeys) -> bool:
    """The group exists, has read every entry and holds none pending."""
    groups = client.xinfo_groups(keys.stream)
    if not groups:
        return False
    [group] = groups
    return (
        group["entries-read"] == client.xlen(keys.stream)
        and client.xpending(keys.stream, keys.group)["pending"] == 0
    )


def test_recreated_group_dead_letters_nothing_twice_and_skips_the_processor(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    ensure_group(redis_client, tx_keys)
    publish(
        redis_client,
        tx_keys,
        [
            {"key": "good-1"},
            {"nokey": "1"},  # invalid: dead-lettered at once
            {"key": "poison", "poison": "1"},  # dead-lettered at the delivery limit
            {"key": "good-2"},
        ],
    )
    worker = start_worker(env={"SENTINEL_RECLAIM_DELIVERY_LIMIT": "2"}).wait_ready(redis_client)
    wait_until(lambda: redis_client.xlen(tx_keys.dlq) == 2 and _caught_up(redis_client, tx_keys))
    poison_calls = int(redis_client.hget(CALLS_KEY, "poison") or 0)
    assert poison_calls == 2

    redis_client.xgroup_destroy(tx_keys.stream, tx_keys.group)  # an operator's mistake
    publish(redis_client, tx_keys, [{"key": "after"}])
    wait_until(lambda: redis_client.hget(CALLS_KEY, "after") == "1")
    wait_until(lambda: _caught_up(redis_client, tx_keys))

    assert redis_client.xlen(tx_keys.dlq) == 2  # no dead letter written twice
    assert int(redis_client.hget(CALLS_KEY, "poison") or 0) == poison_calls  # not called again
    assert worker.events("group_missing")
    assert len(worker.events("dead_lettered")) == 2  # alerted once each
    assert worker.proc.poll() is None
