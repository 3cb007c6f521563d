"""A confirmed death wakes the survivors' blocked reads: recovery does not wait out the block.

The survivor blocks in ``XREADGROUP`` for up to ``SENTINEL_BLOCK_MS``. When its liveness
watch confirms that another worker's connection is gone, it cuts its own read short with
``CLIENT UNBLOCK`` and claims at once; the server's command statistics show the call.
"""

from __future__ import annotations

from sentinel_platform.streams.consumer.healing.liveness import registration_key
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.processes import StartWorker
from sentinel_platform_tests.harness.processors import CALLS_KEY
from sentinel_platform_tests.harness.streams import pending_of, publish
from sentinel_platform_tests.harness.waits import wait_until

#: A lease that cannot expire during the test, and reads that block a whole second.
SLOW_LEASE_LONG_BLOCK = {
    "SENTINEL_LEASE_TTL_MS": "30000",
    "SENTINEL_LAG_KEY_TTL_S": "30",
    "SENTINEL_BLOCK_MS": "1000",
}


def _unblocks(client: RedisClient) -> int:
    stats = client.info("commandstats")
    return int(stats.get("cmdstat_client|unblock", {}).get("calls", 0))


def test_a_confirmed_death_cuts_the_survivors_blocked_read_short(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    publish(redis_client, tx_keys, [{"key": f"m{n}"} for n in range(5)])
    env = SLOW_LEASE_LONG_BLOCK
    victim = start_worker(env=env, args=["--count", "5", "--simulate-latency-ms", "600000"])
    wait_until(lambda: pending_of(redis_client, tx_keys, victim.consumer) == 5)
    survivor = start_worker(env=env).wait_ready(redis_client)
    wait_until(lambda: redis_client.get(registration_key(tx_keys, survivor.consumer)))
    redis_client.config_resetstat()

    victim.kill()

    wait_until(lambda: redis_client.hlen(CALLS_KEY) == 5)
    assert _unblocks(redis_client) >= 1
    assert survivor.events("holder_disconnected")


def test_a_survivor_on_auto_recovers_a_dead_workers_whole_backlog_without_waiting_a_block(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    """A survivor whose limit is still unknown (``auto``, no call timed yet) claims a few
    messages per recovery step. It must look again at once while the dead worker holds
    more, not block its read (1 s at most) first: 3.4 s from the kill to the last call
    before, 0.45 s after; the deadline is 2 s."""
    publish(redis_client, tx_keys, [{"key": f"m{n}"} for n in range(20)])
    env = {**SLOW_LEASE_LONG_BLOCK, "SENTINEL_BLOCK_MS": "5000"}
    victim = start_worker(env=env, args=["--count", "20", "--simulate-latency-ms", "600000"])
    wait_until(lambda: pending_of(redis_client, tx_keys, victim.consumer) == 20)
    survivor_env = {**env, "SENTINEL_WORKER_CONCURRENCY": "auto"}
    survivor = start_worker(env=survivor_env).wait_ready(redis_client)
    wait_until(lambda: redis_client.get(registration_key(tx_keys, survivor.consumer)))

    victim.kill()

    wait_until(lambda: redis_client.hlen(CALLS_KEY) == 20, 2.0, what="all 20 recovered")
