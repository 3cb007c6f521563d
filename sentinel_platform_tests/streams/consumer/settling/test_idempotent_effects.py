"""Idempotent effects: a redelivery or a re-published record never has a second effect."""

from __future__ import annotations

from sentinel_platform.settings import Settings
from sentinel_platform.streams.consumer.group import ensure_group
from sentinel_platform.streams.consumer.settling.idempotency import (
    COMMIT_EFFECTS,
    CommitLimits,
    commit_statuses,
    queue_commit,
)
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.streams import publish


def _commit(client: RedisClient, keys: StreamKeys, settings: Settings, message_id: str) -> str:
    limits = CommitLimits(settings.results_maxlen, 60, settings.recent_transactions_size)
    pipe = client.pipeline(transaction=False)
    queue_commit(pipe, keys, message_id, "txn-1", {"txn_id": "txn-1"}, "recent-1", limits)
    COMMIT_EFFECTS.load(client)
    [status] = commit_statuses(pipe.execute()[0])
    return status


def test_a_redelivered_message_is_acknowledged_without_a_second_effect(
    redis_client: RedisClient, tx_keys: StreamKeys, settings: Settings
) -> None:
    ensure_group(redis_client, tx_keys)
    [message_id] = publish(redis_client, tx_keys, [{"key": "txn-1"}])
    redis_client.xreadgroup(tx_keys.group, "first", {tx_keys.stream: ">"})
    assert _commit(redis_client, tx_keys, settings, message_id) == "applied"
    # Redelivered (reclaimed after the first worker's reply was lost) and committed again.
    redis_client.xclaim(tx_keys.stream, tx_keys.group, "second", 0, [message_id], force=True)
    assert _commit(redis_client, tx_keys, settings, message_id) == "duplicate"

    assert redis_client.xlen(tx_keys.results) == 1
    assert redis_client.lrange(tx_keys.recent, 0, -1) == ["recent-1"]
    assert redis_client.get(tx_keys.marker("txn-1")) == message_id
    assert 0 < redis_client.ttl(tx_keys.marker("txn-1")) <= 60
    assert redis_client.xpending(tx_keys.stream, tx_keys.group)["pending"] == 0


def test_a_settled_delivery_never_gets_an_effect_later(
    redis_client: RedisClient, tx_keys: StreamKeys, settings: Settings
) -> None:
    ensure_group(redis_client, tx_keys)
    [message_id] = publish(redis_client, tx_keys, [{"key": "txn-1"}])
    redis_client.xreadgroup(tx_keys.group, "first", {tx_keys.stream: ">"})
    redis_client.xack(tx_keys.stream, tx_keys.group, message_id)  # e.g. dead-lettered meanwhile
    assert _commit(redis_client, tx_keys, settings, message_id) == "stale"
    assert not redis_client.exists(tx_keys.results, tx_keys.marker("txn-1"))
