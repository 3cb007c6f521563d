"""Self-healing: dead workers' messages recovered, live ones never robbed, hung ones give up."""

from __future__ import annotations

import time

from sentinel_platform.streams.consumer.group import ensure_group
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.processes import FAST_TIMINGS, StartWorker
from sentinel_platform_tests.harness.processors import CALLS_KEY
from sentinel_platform_tests.harness.streams import pending_of, publish
from sentinel_platform_tests.harness.waits import wait_until

LEASE_TTL_S = int(FAST_TIMINGS["SENTINEL_LEASE_TTL_MS"]) / 1000
RECLAIM_IDLE_MS = int(FAST_TIMINGS["SENTINEL_RECLAIM_IDLE_MS"])


def _results(client: RedisClient, keys: StreamKeys) -> list[dict[str, str]]:
    return [fields for _id, fields in client.xrange(keys.results)]


def test_dead_worker_messages_are_recovered_by_a_survivor_within_lease_ttl(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    # The victim takes 10 messages and sits on them (60 s per message) until it is killed.
    publish(redis_client, tx_keys, [{"key": f"m{n}"} for n in range(10)])
    victim = start_worker(args=["--count", "10", "--simulate-latency-ms", "60000"])
    wait_until(lambda: pending_of(redis_client, tx_keys, victim.consumer) == 10)
    # A long --block-ms must not delay recovery: reads block at most 1 s.
    survivor = start_worker(args=["--block-ms", "60000"]).wait_ready(redis_client)
    time.sleep(LEASE_TTL_S * 1.5)  # past RECLAIM_IDLE_MS: a live lease alone protects them
    assert redis_client.xlen(tx_keys.results) == 0

    victim.kill()
    killed_at = time.monotonic()
    wait_until(lambda: redis_client.xlen(tx_keys.results) == 10, 10)
    elapsed = time.monotonic() - killed_at

    assert elapsed <= LEASE_TTL_S + 2, f"recovered after {elapsed:.2f}s"
    assert {r["key"] for r in _results(redis_client, tx_keys)} == {f"m{n}" for n in range(10)}
    recovered = survivor.events("recovered")
    assert {e["claimed_from"] for e in recovered} == {victim.consumer}
    assert len({e["message_id"] for e in recovered}) == 10
    assert pending_of(redis_client, tx_keys, survivor.consumer) == 0


def test_a_live_worker_with_a_slow_message_is_never_robbed(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    # 3 x the reclaim idle time, and longer than the lease TTL: only the heartbeat
    # thread keeps the lease alive while the message is processed.
    reclaim_idle_ms = 400
    slow_ms = 3 * reclaim_idle_ms
    assert slow_ms > LEASE_TTL_S * 1000
    env = {"SENTINEL_RECLAIM_IDLE_MS": str(reclaim_idle_ms)}
    workers = [
        start_worker(env=env, args=["--count", "1"]).wait_ready(redis_client) for _ in range(3)
    ]
    keys = [f"slow{n}" for n in range(2)]
    publish(redis_client, tx_keys, [{"key": k, "sleep_ms": str(slow_ms)} for k in keys])

    wait_until(lambda: redis_client.xlen(tx_keys.results) == 2, 15)
    time.sleep(0.5)  # a late thief would show up as a second call
    calls = redis_client.hgetall(CALLS_KEY)
    assert calls == dict.fromkeys(keys, "1"), "a message was processed twice"
    assert not any(w.events("recovered") for w in workers)
    # The situation did arise: the idle worker saw messages idle past the reclaim time.
    skipped = [e for w in workers for e in w.events("skipped_alive")]
    assert skipped and {e["holder"] for e in skipped} <= {w.consumer for w in workers}


def test_legacy_consumer_without_a_lease_is_recovered_after_reclaim_idle_across_its_whole_pel(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    # A Sentinel-L7 worker (no lease protocol) read 450 messages and died.
    ensure_group(redis_client, tx_keys)
    publish(redis_client, tx_keys, [{"key": f"m{n}"} for n in range(450)])
    redis_client.xreadgroup(tx_keys.group, "legacy-php", {tx_keys.stream: ">"}, count=450)
    started = time.monotonic()  # the entries' idle time counts from their delivery
    deleted = redis_client.xrange(tx_keys.stream, count=3)
    redis_client.xdel(tx_keys.stream, *[message_id for message_id, _ in deleted])

    worker = start_worker(args=["--count", "100"]).wait_ready(redis_client)
    wait_until(lambda: redis_client.xlen(tx_keys.results) == 447, 15)

    assert time.monotonic() - started >= RECLAIM_IDLE_MS / 1000
    assert pending_of(redis_client, tx_keys, "legacy-php") == 0
    assert redis_client.xpending(tx_keys.stream, tx_keys.group)["pending"] == 0
    trimmed = {e["message_id"] for e in worker.events("trimmed")}
    assert trimmed == {message_id for message_id, _ in deleted}
    assert len(worker.events("recovered")) == 447


def test_a_hung_worker_gives_up_its_lease_and_exits_so_a_survivor_recovers(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    env = {"SENTINEL_HANG_TIMEOUT_MS": "1500"}
    hung = start_worker(env=env).wait_ready(redis_client)
    publish(redis_client, tx_keys, [{"key": "stuck", "hang_once": "1"}])
    wait_until(lambda: redis_client.hget(CALLS_KEY, "stuck"))
    survivor = start_worker(env=env).wait_ready(redis_client)

    assert hung.wait(10) == 70
    [event] = hung.events("worker_hung")
    assert event["in_hand_s"] > 1.5
    assert not hung.lease_alive(redis_client)
    wait_until(lambda: redis_client.xlen(tx_keys.results) == 1, LEASE_TTL_S + 3)
    [result] = _results(redis_client, tx_keys)
    assert result["call"] == "2"
    assert survivor.events("recovered")[0]["claimed_from"] == hung.consumer
