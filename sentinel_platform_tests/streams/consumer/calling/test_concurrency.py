"""Many messages in flight in one worker (``--concurrency``), with every guarantee kept.

Real worker processes run the counting test processor; messages with ``sleep_ms`` stand
for slow analyzer calls, and the processor records how many of them ran at once.
"""

from __future__ import annotations

import time

from sentinel_platform.schemas import DeadLetter
from sentinel_platform.streams.backlog.holdings import read_holdings
from sentinel_platform.streams.consumer.group import ensure_group
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.processes import StartWorker
from sentinel_platform_tests.harness.processors import CALLS_KEY, PEAK_KEY
from sentinel_platform_tests.harness.streams import pending_of, publish
from sentinel_platform_tests.harness.waits import wait_until

C = 8


def _slow(prefix: str, count: int, sleep_ms: int) -> list[dict[str, str]]:
    return [{"key": f"{prefix}{n}", "sleep_ms": str(sleep_ms)} for n in range(count)]


def _effects(client: RedisClient, keys: StreamKeys) -> dict[str, int]:
    counts: dict[str, int] = {}
    for _id, fields in client.xrange(keys.results):
        counts[fields["key"]] = counts.get(fields["key"], 0) + 1
    return counts


def _all_settled(client: RedisClient, keys: StreamKeys, expected: int) -> bool:
    settled = client.xlen(keys.results) + client.xlen(keys.dlq)
    return settled >= expected and client.xpending(keys.stream, keys.group)["pending"] == 0


def test_one_worker_runs_c_calls_at_once_and_applies_each_effect_once(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    ensure_group(redis_client, tx_keys)
    messages = _slow("m", 4 * C, 400)
    publish(redis_client, tx_keys, messages)
    start_worker(args=["--concurrency", str(C)]).wait_ready(redis_client)

    wait_until(lambda: _all_settled(redis_client, tx_keys, len(messages)), timeout_s=30)

    assert int(redis_client.get(PEAK_KEY) or 0) == C  # never more, and really C at once
    assert _effects(redis_client, tx_keys) == {m["key"]: 1 for m in messages}
    assert set(redis_client.hvals(CALLS_KEY)) == {"1"}


def _reads(client: RedisClient) -> int:
    stats = client.info("commandstats").get("cmdstat_xreadgroup", {})
    return int(stats.get("calls", 0))


def test_a_slow_worker_reads_ahead_in_batches_and_says_it_holds_them(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    """Without the read-ahead a worker of slow calls read once per finished call, about
    one message a read; with it one read serves half a limit of finished calls."""
    ensure_group(redis_client, tx_keys)
    worker = start_worker(args=["--concurrency", str(C)]).wait_ready(redis_client)
    messages = _slow("m", 20 * C, 100)
    before = _reads(redis_client)
    publish(redis_client, tx_keys, messages)

    wait_until(lambda: read_holdings(redis_client, tx_keys).by_consumer.get(worker.consumer) == 12)
    wait_until(lambda: _all_settled(redis_client, tx_keys, len(messages)), timeout_s=30)

    reads = _reads(redis_client) - before
    assert reads <= len(messages) / 3, f"{reads} reads for {len(messages)} messages"
    assert int(redis_client.get(PEAK_KEY) or 0) == C  # read ahead, never called ahead
    assert _effects(redis_client, tx_keys) == {m["key"]: 1 for m in messages}


def test_lag_counts_the_messages_in_flight(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    ensure_group(redis_client, tx_keys)
    publish(redis_client, tx_keys, _slow("m", C, 3000))
    start_worker(args=["--concurrency", str(C)]).wait_ready(redis_client)

    wait_until(lambda: int(redis_client.get(PEAK_KEY) or 0) == C)
    # Everything was read: the group's backlog is 0, yet the published lag says C.
    wait_until(lambda: int(redis_client.get(tx_keys.lag) or 0) == C)


def test_a_live_worker_with_c_slow_calls_is_never_robbed(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    ensure_group(redis_client, tx_keys)
    slow = start_worker(args=["--concurrency", str(C)]).wait_ready(redis_client)
    # Each call lasts three lease TTLs and five reclaim idle times of FAST_TIMINGS.
    messages = _slow("slow", C, 3000)
    publish(redis_client, tx_keys, messages)
    wait_until(lambda: pending_of(redis_client, tx_keys, slow.consumer) == C)
    other = start_worker(args=["--concurrency", str(C)]).wait_ready(redis_client)

    wait_until(lambda: _all_settled(redis_client, tx_keys, C), timeout_s=20)

    assert set(redis_client.hvals(CALLS_KEY)) == {"1"}  # nobody took a live worker's call
    assert _effects(redis_client, tx_keys) == {m["key"]: 1 for m in messages}
    # "recovered" is what a worker logs for each message it takes from another holder
    assert not other.events("recovered") and slow.proc.poll() is None


def test_sigkill_with_c_calls_in_flight_loses_nothing_and_applies_once(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    ensure_group(redis_client, tx_keys)
    victim = start_worker(args=["--concurrency", str(C)]).wait_ready(redis_client)
    messages = _slow("k", 3 * C, 1500)
    publish(redis_client, tx_keys, messages)
    wait_until(lambda: int(redis_client.get(PEAK_KEY) or 0) == C)
    survivor = start_worker(args=["--concurrency", str(C)]).wait_ready(redis_client)

    victim.kill()

    wait_until(lambda: _all_settled(redis_client, tx_keys, len(messages)), timeout_s=30)
    assert _effects(redis_client, tx_keys) == {m["key"]: 1 for m in messages}
    assert redis_client.xlen(tx_keys.dlq) == 0
    assert survivor.proc.poll() is None


def test_sigterm_finishes_the_calls_in_flight_and_hands_back_the_rest_with_exit_0(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    ensure_group(redis_client, tx_keys)
    worker = start_worker(args=["--concurrency", str(C), "--count", "50"]).wait_ready(redis_client)
    messages = _slow("t", 5 * C, 800)
    publish(redis_client, tx_keys, messages)
    wait_until(lambda: int(redis_client.get(PEAK_KEY) or 0) == C)

    stopped_at = time.monotonic()
    worker.terminate()
    assert worker.wait(20) == 0
    assert time.monotonic() - stopped_at < 10  # within the default stop timeout
    assert pending_of(redis_client, tx_keys, worker.consumer) == 0
    assert redis_client.xlen(tx_keys.results) >= C  # the calls in flight finished

    start_worker(args=["--concurrency", str(C)]).wait_ready(redis_client)
    wait_until(lambda: _all_settled(redis_client, tx_keys, len(messages)), timeout_s=30)
    assert _effects(redis_client, tx_keys) == {m["key"]: 1 for m in messages}


def test_calls_that_outlast_the_stop_timeout_are_handed_back_and_applied_once(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    ensure_group(redis_client, tx_keys)
    env = {"SENTINEL_SHUTDOWN_TIMEOUT_S": "1"}
    worker = start_worker(args=["--concurrency", "4"], env=env).wait_ready(redis_client)
    messages = _slow("long", 4, 4000)
    publish(redis_client, tx_keys, messages)
    wait_until(lambda: int(redis_client.get(PEAK_KEY) or 0) == 4)

    worker.terminate()
    assert worker.wait(15) == 0
    assert pending_of(redis_client, tx_keys, worker.consumer) == 0

    start_worker().wait_ready(redis_client)
    wait_until(lambda: _all_settled(redis_client, tx_keys, len(messages)), timeout_s=30)
    assert _effects(redis_client, tx_keys) == {m["key"]: 1 for m in messages}


def test_delivery_limit_is_exact_and_bad_messages_die_while_good_ones_finish(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    ensure_group(redis_client, tx_keys)
    good = _slow("good", 2 * C, 300)
    bad = [{"key": f"poison{n}", "poison": "1"} for n in range(3)] + [{"nokey": "1"}]
    publish(redis_client, tx_keys, [*good[:C], *bad, *good[C:]])
    env = {"SENTINEL_RECLAIM_DELIVERY_LIMIT": "3"}
    start_worker(args=["--concurrency", str(C)], env=env).wait_ready(redis_client)

    wait_until(lambda: _all_settled(redis_client, tx_keys, len(good) + len(bad)), timeout_s=30)

    calls = redis_client.hgetall(CALLS_KEY)
    assert {k: calls[k] for k in calls if k.startswith("poison")} == {
        f"poison{n}": "3" for n in range(3)
    }
    letters = [DeadLetter.from_fields(f) for _id, f in redis_client.xrange(tx_keys.dlq)]
    assert sorted(letter.reason for letter in letters) == [
        "invalid_message",
        *["max_deliveries_exceeded"] * 3,
    ]
    assert _effects(redis_client, tx_keys) == {m["key"]: 1 for m in good}


def test_a_committed_key_and_copies_in_flight_cost_one_processor_call(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    ensure_group(redis_client, tx_keys)
    publish(redis_client, tx_keys, [{"key": "done-before", "sleep_ms": "10"}])
    worker = start_worker(args=["--concurrency", str(C)]).wait_ready(redis_client)
    wait_until(lambda: redis_client.xlen(tx_keys.results) == 1)

    copies = [{"key": "same", "sleep_ms": "500"}] * 5
    publish(redis_client, tx_keys, [{"key": "done-before", "sleep_ms": "10"}, *copies])
    wait_until(lambda: _all_settled(redis_client, tx_keys, 2), timeout_s=15)
    wait_until(lambda: len(worker.events("duplicate_ack")) == 5)

    assert redis_client.hgetall(CALLS_KEY) == {"done-before": "1", "same": "1"}
    assert _effects(redis_client, tx_keys) == {"done-before": 1, "same": 1}
