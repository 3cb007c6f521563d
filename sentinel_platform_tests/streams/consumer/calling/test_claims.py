"""The in-flight claims of paid calls on a real Redis: taken once, shared as "wait" with
other consumers, refreshed only once they are old enough to need it."""

from __future__ import annotations

import time

from sentinel_platform.settings import Settings
from sentinel_platform.streams.consumer.calling.claims import (
    REFRESH,
    REFRESH_AFTER,
    Claims,
    claim_key,
)
from sentinel_platform.streams.consumer.outcomes import Delivery, Prepared
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.harness.waits import wait_until

TTL_MS = 900


def _due(*keys: str) -> list[Prepared]:
    return [Prepared(Delivery(f"{n + 1}-0", {}, 1), None, key) for n, key in enumerate(keys)]


def test_a_held_claim_outlives_its_ttl_and_a_copy_elsewhere_waits(
    redis_client: RedisClient, settings: Settings
) -> None:
    """A call longer than the claim's TTL: the holder keeps the key while it refreshes
    (with its lag writes); a fresh claim costs no refresh at all (a call of 100 ms would
    otherwise add two commands per message to every lag write)."""
    keys = transaction_keys(settings)
    REFRESH.load(redis_client)  # the worker loads every script at start
    holder = Claims(redis_client, keys, "w-1", TTL_MS)
    other = Claims(redis_client, keys, "w-2", TTL_MS)
    mine, done = holder.take(_due("k1"))
    assert [p.natural_key for p in mine] == ["k1"] and not done
    holder.keep({"k1"})

    def refresh() -> int:
        pipe = redis_client.pipeline(transaction=False)
        holder.queue_refresh(pipe)
        queued = len(pipe)
        pipe.execute()
        return queued

    assert refresh() == 0  # younger than a third of its TTL: nothing to send
    ends = time.monotonic() + 3 * TTL_MS / 1000
    refreshed = 0
    while time.monotonic() < ends:
        refreshed += refresh()
        time.sleep(REFRESH_AFTER * TTL_MS / 1000 / 3)
    assert refreshed > 0
    assert redis_client.get(claim_key(keys, "k1")) == "w-1"
    mine, done = other.take(_due("k1"))
    assert not mine and not done and len(other.waiting) == 1


def test_a_claim_left_alone_lapses_and_another_consumer_takes_it(
    redis_client: RedisClient, settings: Settings
) -> None:
    keys = transaction_keys(settings)
    Claims(redis_client, keys, "w-1", TTL_MS).take(_due("k2"))
    other = Claims(redis_client, keys, "w-2", TTL_MS)
    assert other.take(_due("k2")) == ([], [])
    wait_until(lambda: redis_client.exists(claim_key(keys, "k2")) == 0, 5, what="lapse")
    mine, _ = other.recheck(time.monotonic() + 1)
    assert [p.natural_key for p in mine] == ["k2"]
    assert redis_client.get(claim_key(keys, "k2")) == "w-2"
