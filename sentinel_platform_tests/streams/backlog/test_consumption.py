"""Lag as it really is while a worker process holds a slow message (consumption itself is
tested in-process in ``streams/``)."""

from __future__ import annotations

import time

from sentinel_platform.streams.backlog.lag import read_lag_key
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.processes import StartWorker
from sentinel_platform_tests.harness.streams import publish
from sentinel_platform_tests.harness.waits import wait_until


def _lag(client: RedisClient, keys: StreamKeys) -> int | None:
    return read_lag_key(client, keys)


def test_lag_key_counts_backlog_plus_pending_and_survives_a_slow_message(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    # Lag key TTL is 2 s in FAST_TIMINGS; the first message takes 3 s.
    messages = [{"key": "slow", "sleep_ms": "3000"}] + [{"key": f"m{n}"} for n in range(4)]
    publish(redis_client, tx_keys, messages)
    start_worker(args=["--count", "1"]).wait_ready(redis_client)
    from sentinel_platform_tests.harness.processors import CALLS_KEY

    wait_until(lambda: redis_client.hget(CALLS_KEY, "slow"), 10)
    deadline = time.monotonic() + 3.5
    seen: list[int | None] = []
    while time.monotonic() < deadline:
        # Results and lag in one snapshot: a lag read just after the commit is not a sample.
        pipe = redis_client.pipeline(transaction=True)
        pipe.xlen(tx_keys.results)
        pipe.get(tx_keys.lag)
        results, lag = pipe.execute()
        if results:
            break
        seen.append(None if lag is None else int(lag))
        time.sleep(0.1)  # the sampling period, not a wait for a condition
    # While the slow message is in flight: never missing, always 4 backlog + 1 pending.
    assert len(seen) >= 5
    assert set(seen) == {5}, seen
    wait_until(lambda: _lag(redis_client, tx_keys) == 0, 10)
    assert redis_client.xlen(tx_keys.results) == 5
