"""The batch lane's lease on a real server: one holder at a time, kept alive by its own
thread however long a step takes, and seen lost once another holds it."""

from __future__ import annotations

import threading
import time

from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform_tests.harness.waits import wait_until
from workers.batchlane.lease import LaneLease

KEY = "sentinel:leases:test:batch:lane"
TTL_MS = 300


def test_one_holder_at_a_time_and_the_lease_outlives_a_long_step(
    redis_client: RedisClient,
) -> None:
    first = LaneLease(redis_client, KEY, "worker-a", TTL_MS)
    second = LaneLease(redis_client, KEY, "worker-b", TTL_MS)
    stop = threading.Event()
    assert first.take()
    assert not second.take()
    with first.kept(stop) as lost:
        time.sleep(3 * TTL_MS / 1000)  # a step far longer than the TTL
        assert not lost.is_set()
        assert not second.take()
    first.release()
    assert second.take()


def test_a_holder_whose_lease_was_taken_sees_it_lost_and_never_extends_it(
    redis_client: RedisClient,
) -> None:
    first = LaneLease(redis_client, KEY, "worker-a", TTL_MS)
    stop = threading.Event()
    assert first.take()
    with first.kept(stop) as lost:
        redis_client.set(KEY, "worker-b", px=10 * TTL_MS)  # the lease lapsed and was taken
        wait_until(lost.is_set, timeout_s=5)
    first.release()  # not ours: left alone
    assert redis_client.get(KEY) == "worker-b"


def test_a_stopped_wait_takes_nothing(redis_client: RedisClient) -> None:
    redis_client.set(KEY, "worker-b", px=60_000)
    stop = threading.Event()
    stop.set()
    assert not LaneLease(redis_client, KEY, "worker-a", TTL_MS).wait(stop)
