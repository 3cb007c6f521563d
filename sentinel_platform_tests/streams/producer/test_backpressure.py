"""The producer guard against a real Redis: real consumer groups, lag key and flags driven
by the test, consumers reading on a thread at a chosen speed."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from sentinel_platform.registry import TRANSACTIONS
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.drain import write_drain_rate
from sentinel_platform.streams.backlog.holdings import publish_holding
from sentinel_platform.streams.backlog.zones import thresholds
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, drain_rate_key
from sentinel_platform.streams.producer.backpressure import (
    BackpressureConfig,
    BackpressureGuard,
    BackpressureTimeout,
    PublishInterrupted,
)
from sentinel_platform.streams.producer.partition_publisher import PartitionPublisher
from sentinel_platform.streams.producer.publish import publish_rows, stop_key
from sentinel_platform_tests.harness.waits import wait_until

Later = Callable[[float, Callable[[], Any]], None]
Consumers = Callable[[float], None]


def _entries(n: int) -> list[dict[str, str]]:
    return [{"data": f'{{"n":{i}}}'} for i in range(n)]


def _timed(action: Callable[[], Any]) -> tuple[Any, float]:
    started = time.monotonic()
    result = action()
    return result, time.monotonic() - started


@pytest.fixture
def consumers(redis_client: RedisClient, txn_keys: StreamKeys) -> Iterator[Consumers]:
    """Start a consumer on a thread reading and acking ``rate`` entries/s (0: as fast as it can)."""
    done = threading.Event()
    threads: list[threading.Thread] = []
    redis_client.xgroup_create(txn_keys.stream, txn_keys.group, id="0", mkstream=True)

    def read(rate: float) -> None:
        client = redis_client.client()
        while not done.is_set():
            got = client.xreadgroup(
                txn_keys.group, "c1", {txn_keys.stream: ">"}, count=10, block=50
            )
            ids = [i for _, entries in got for i, _ in entries]
            if ids:
                client.xack(txn_keys.stream, txn_keys.group, *ids)
                if rate:
                    done.wait(len(ids) / rate)

    def start(rate: float) -> None:
        thread = threading.Thread(target=read, args=(rate,), daemon=True)
        thread.start()
        threads.append(thread)

    yield start
    done.set()
    for thread in threads:
        thread.join(timeout=10)


def test_fast_consumers_let_every_batch_through_without_a_stop(
    redis_client: RedisClient,
    txn_keys: StreamKeys,
    make_guard: Callable[..., BackpressureGuard],
    consumers: Consumers,
) -> None:
    consumers(0)
    guard = make_guard()
    stats = publish_rows(redis_client, txn_keys, _entries(2_000), 250, guard)
    assert stats.rows == 2_000 and redis_client.xlen(txn_keys.stream) == 2_000
    assert stats.hard_events == 0 and stats.paused_s == 0
    assert stats.max_lag < guard.config.lag_pause


def test_slow_consumers_pace_the_producer_below_the_hard_limit(
    redis_client: RedisClient,
    txn_keys: StreamKeys,
    make_guard: Callable[..., BackpressureGuard],
    consumers: Consumers,
) -> None:
    consumers(300)
    guard = make_guard(lag_warn=50, lag_pause=200)
    # 125 fill the set point at once; the other 375 go at about the consumers' rate.
    stats = publish_rows(redis_client, txn_keys, _entries(500), 500, guard)
    assert stats.rows == 500 and stats.hard_events == 0
    assert stats.soft_events == 1 and stats.slowed_s > 0  # one pacing episode
    assert stats.batches > 5, "sent in a few big batches: not paced"
    assert guard.stats.max_lag < guard.config.lag_pause


def test_first_batch_fills_only_up_to_the_set_point(
    redis_client: RedisClient,
    txn_keys: StreamKeys,
    make_guard: Callable[..., BackpressureGuard],
    consumers: Consumers,
) -> None:
    consumers(50)
    guard = make_guard(lag_warn=50, lag_pause=200)
    assert guard.config.set_point == 125
    assert guard.wait_before_batch(500) == 125


def test_consumers_reading_nothing_hold_the_producer_and_it_gives_up_naming_why(
    redis_client: RedisClient, txn_keys: StreamKeys, make_guard: Callable[..., BackpressureGuard]
) -> None:
    redis_client.xgroup_create(txn_keys.stream, txn_keys.group, id="0", mkstream=True)
    publish_rows(redis_client, txn_keys, _entries(130), 130)  # elevated, below the hard limit
    guard = make_guard(lag_warn=50, lag_pause=200, max_pause_s=2.5)
    with pytest.raises(BackpressureTimeout) as raised:
        publish_rows(redis_client, txn_keys, _entries(100), 10, guard)
    assert "consumers read nothing" in str(raised.value) and "lag 130" in str(raised.value)
    assert redis_client.xlen(txn_keys.stream) == 130  # nothing sent into the dead group


def test_pacing_episode_is_logged_once_and_counted_once(
    redis_client: RedisClient,
    txn_keys: StreamKeys,
    make_guard: Callable[..., BackpressureGuard],
    consumers: Consumers,
    caplog: pytest.LogCaptureFixture,
) -> None:
    consumers(400)
    guard = make_guard(lag_warn=50, lag_pause=200)
    caplog.set_level(logging.INFO, logger="sentinel_platform.streams.producer.backpressure")
    publish_rows(redis_client, txn_keys, _entries(400), 100, guard)
    wait_until(lambda: redis_client.xinfo_groups(txn_keys.stream)[0]["lag"] == 0)
    wait_until(lambda: redis_client.xinfo_groups(txn_keys.stream)[0]["pending"] == 0)
    guard.wait_before_batch(10)  # back below the soft limit: the episode ends
    warnings = [r for r in caplog.records if "soft limit, pacing" in r.getMessage()]
    endings = [r for r in caplog.records if "back to nominal" in r.getMessage()]
    assert guard.stats.soft_events == 1 and len(warnings) == 1 and len(endings) == 1
    assert warnings[0].stream == txn_keys.stream and warnings[0].lag >= 125


def test_hard_limit_stops_until_lag_falls_below_resume_level(
    redis_client: RedisClient,
    txn_keys: StreamKeys,
    make_guard: Callable[..., BackpressureGuard],
    later: Later,
) -> None:
    guard = make_guard(lag_warn=50, lag_pause=200)  # resumes below 125
    assert guard.config.resume_level == 125
    redis_client.set(txn_keys.lag, 250)
    later(0.3, lambda: redis_client.set(txn_keys.lag, 150))  # below pause, above resume
    later(0.7, lambda: redis_client.set(txn_keys.lag, 100))
    budget, waited = _timed(lambda: guard.wait_before_batch(500))
    assert 0.65 < waited < 2.0, "resumed at 150 (no hysteresis) or never"
    assert guard.stats.hard_events == 1 and guard.stats.paused_s >= 0.65
    # The published 100 is stale (below the hard limit): the measured lag (0) steers.
    assert budget == guard.config.set_point and guard.stats.soft_events == 0


def test_pause_flag_stops_like_the_hard_limit_and_resumes_when_cleared(
    redis_client: RedisClient,
    txn_keys: StreamKeys,
    make_guard: Callable[..., BackpressureGuard],
    later: Later,
) -> None:
    redis_client.set(txn_keys.lag, 0)
    redis_client.set(txn_keys.paused, "1")
    later(0.4, lambda: redis_client.delete(txn_keys.paused))
    guard = make_guard()
    stats, waited = _timed(lambda: publish_rows(redis_client, txn_keys, _entries(10), 5, guard))
    assert waited >= 0.38 and stats.rows == 10
    assert stats.hard_events == 1 and stats.paused_s >= 0.38


def test_pause_flag_set_to_zero_does_not_pause(
    redis_client: RedisClient, txn_keys: StreamKeys, make_guard: Callable[..., BackpressureGuard]
) -> None:
    redis_client.set(txn_keys.lag, 0)
    redis_client.set(txn_keys.paused, "0")
    guard = make_guard(max_pause_s=0.2)
    assert guard.wait_before_batch(10) == 10 and guard.stats.hard_events == 0


def test_max_pause_fails_naming_stream_lag_and_duration(
    redis_client: RedisClient, txn_keys: StreamKeys, make_guard: Callable[..., BackpressureGuard]
) -> None:
    redis_client.set(txn_keys.lag, 512)
    guard = make_guard(max_pause_s=0.5)
    with pytest.raises(BackpressureTimeout) as raised:
        guard.wait_before_batch(100)
    message = str(raised.value)
    assert f"stream {txn_keys.stream!r}" in message and "lag 512" in message
    assert "for 0.5s" in message and "SENTINEL_MAX_PAUSE_S" in message
    assert redis_client.xlen(txn_keys.stream) == 0


def test_should_stop_interrupts_a_long_wait_within_a_second(
    redis_client: RedisClient, txn_keys: StreamKeys, make_guard: Callable[..., BackpressureGuard]
) -> None:
    redis_client.set(txn_keys.lag, 999)
    asked_at: list[float] = []

    def should_stop() -> bool:
        if not asked_at:
            asked_at.append(time.monotonic() + 0.3)
        return time.monotonic() >= asked_at[0]

    # A 30 s poll interval would hide a stop request for 30 s without the sliced waits.
    guard = make_guard(should_stop=should_stop, lag_pause_poll_ms=30_000, max_pause_s=60)
    with pytest.raises(PublishInterrupted):
        guard.wait_before_batch(100)
    assert time.monotonic() - asked_at[0] < 1.0


def test_stop_key_interrupts_an_executor_wait_and_blocks_retries(
    redis_client: RedisClient, txn_keys: StreamKeys, settings: Any, later: Later
) -> None:
    redis_client.set(txn_keys.lag, 999)
    key = stop_key(txn_keys, "run-1")
    publisher = PartitionPublisher(
        url=settings.redis_url_value,
        cluster=False,
        keys=txn_keys,
        spec=TRANSACTIONS,
        config=BackpressureConfig(
            lag_warn=50, lag_pause=200, lag_pause_poll_ms=30_000, max_pause_s=60
        ),
        batch_size=10,
        stop_key=key,
    )
    row = {
        "id": "t1",
        "merchant": "m",
        "category": "retail",
        "currency": "USD",
        "amount": 1.5,
        "message": "",
        "is_threat": False,
        "source": "test",
        "timestamp": "2026-11-21T00:00:00Z",
    }
    set_at: list[float] = []
    later(0.3, lambda: (set_at.append(time.monotonic()), redis_client.set(key, "1")))
    with pytest.raises(PublishInterrupted):
        publisher.publish([row])
    assert time.monotonic() - set_at[0] < 1.0
    # A retried task sees the key at once and publishes nothing.
    redis_client.set(txn_keys.lag, 0)
    with pytest.raises(PublishInterrupted):
        publisher.publish([row])
    assert redis_client.xlen(txn_keys.stream) == 0


def test_a_sibling_stopped_by_a_timeout_names_the_timeout_not_just_the_stop(
    redis_client: RedisClient, txn_keys: StreamKeys, settings: Any
) -> None:
    """Spark reports whichever task fails first: a partition stopped because its sibling
    gave up must carry the sibling's reason, or the run's error hides the cause."""
    redis_client.set(txn_keys.lag, 777)
    publisher = PartitionPublisher(
        url=settings.redis_url_value,
        cluster=False,
        keys=txn_keys,
        spec=TRANSACTIONS,
        config=BackpressureConfig(lag_warn=50, lag_pause=200, max_pause_s=0.3),
        batch_size=10,
        stop_key=stop_key(txn_keys, "run-2"),
    )
    with pytest.raises(BackpressureTimeout) as gave_up:
        publisher.publish_entries(_entries(1))
    with pytest.raises(PublishInterrupted) as sibling:
        publisher.publish_entries(_entries(1))
    message = str(sibling.value)
    assert "was asked to stop" in message
    assert f"BackpressureTimeout: {gave_up.value}" in message
    assert "lag 777" in message and "SENTINEL_MAX_PAUSE_S" in message


def test_missing_lag_key_with_big_backlog_pauses_until_drained(
    redis_client: RedisClient,
    txn_keys: StreamKeys,
    make_guard: Callable[..., BackpressureGuard],
    later: Later,
) -> None:
    redis_client.xgroup_create(txn_keys.stream, txn_keys.group, id="0", mkstream=True)
    publish_rows(redis_client, txn_keys, _entries(300), 100)  # no guard: pre-existing backlog

    def drain() -> None:
        read = redis_client.xreadgroup(txn_keys.group, "c1", {txn_keys.stream: ">"}, count=1000)
        redis_client.xack(txn_keys.stream, txn_keys.group, *[i for i, _ in read[0][1]])

    later(0.4, drain)
    guard = make_guard(lag_warn=50, lag_pause=200)
    signal = guard.read_signal()
    assert signal.lag == 300  # nothing read yet: the whole stream is backlog
    budget, waited = _timed(lambda: guard.wait_before_batch(100))
    assert waited >= 0.38 and budget == 100
    assert guard.stats.hard_events == 1 and guard.stats.max_lag == 300


def test_missing_lag_key_with_small_backlog_publishes_freely(
    redis_client: RedisClient, txn_keys: StreamKeys, make_guard: Callable[..., BackpressureGuard]
) -> None:
    guard = make_guard(max_pause_s=0.3)
    stats = publish_rows(redis_client, txn_keys, _entries(40), 10, guard)
    assert stats.rows == 40 and stats.hard_events == 0 and stats.soft_events == 0


# --- the limits in seconds of work (the defaults) --------------------------------------
SECONDS = {"lag_warn": None, "lag_pause": None}


def test_time_limits_let_fast_consumers_run_without_a_stop_and_publish_the_rate(
    redis_client: RedisClient,
    txn_keys: StreamKeys,
    make_guard: Callable[..., BackpressureGuard],
    consumers: Consumers,
) -> None:
    # Fast, yet bounded: an unbounded reader on an idle machine can empty the stream
    # between the guard's readings, which then never see work waiting to time a rate on.
    consumers(5_000)
    guard = make_guard(**SECONDS)
    stats = publish_rows(redis_client, txn_keys, _entries(20_000), 500, guard)
    assert stats.rows == 20_000 and stats.hard_events == 0 and stats.paused_s == 0
    rate = guard.drain_rate
    assert rate is not None and rate > 0
    bounds = thresholds(guard.config.zone_limits(), rate)
    assert bounds.warn is not None and stats.max_lag < bounds.warn, "stayed nominal"
    stored = redis_client.get(drain_rate_key(txn_keys))
    assert stored is not None and float(stored) > 0
    assert redis_client.ttl(drain_rate_key(txn_keys)) > 0
    assert redis_client.get(txn_keys.lag) is None, "the lag key is left to the workers"


def test_time_limits_pace_slow_consumers_to_about_a_second_of_work(
    redis_client: RedisClient,
    txn_keys: StreamKeys,
    make_guard: Callable[..., BackpressureGuard],
    consumers: Consumers,
) -> None:
    consumers(1_000)
    guard = make_guard(**SECONDS)
    stats = publish_rows(redis_client, txn_keys, _entries(4_000), 500, guard)
    assert stats.rows == 4_000 and stats.hard_events == 0
    assert stats.slowed_s > 0, "paced to the consumers"
    rate = guard.drain_rate
    assert rate is not None and 500 < rate < 1_500
    # about 100 in flight + 1 s of work at the set point; warn is at 2 s of work
    warn = thresholds(guard.config.zone_limits(), rate).warn
    assert warn is not None and stats.max_lag < warn, "stayed nominal"


def test_the_set_point_is_what_the_workers_published_plus_a_second_of_work(
    redis_client: RedisClient, txn_keys: StreamKeys, make_settings: Callable[..., Settings]
) -> None:
    """The issue's case: one worker at SENTINEL_WORKER_CONCURRENCY=8 on a 200 ms
    processor (40 rows/s) published that it holds 8. The set point is 8 + 40 (about a
    second of work), not 100 x 8 + 40 = 840 (21 s of work)."""
    redis_client.xgroup_create(txn_keys.stream, txn_keys.group, id="0", mkstream=True)
    write_drain_rate(redis_client, txn_keys, 40.0, 0)
    publish_holding(redis_client, txn_keys, "worker-a", 8, 60)
    config = BackpressureConfig.from_settings(make_settings(worker_concurrency=8))
    guard = BackpressureGuard(redis_client, txn_keys, config)
    first = guard.wait_before_batch(1_000)
    assert guard.allowance == 8
    assert guard.current_limits().set_point == 48
    assert first <= 48
    assert guard.zone_limits().in_flight == 8


def test_with_no_worker_published_the_allowance_is_0_and_the_first_batch_a_read_or_two(
    redis_client: RedisClient, txn_keys: StreamKeys, make_settings: Callable[..., Settings]
) -> None:
    redis_client.xgroup_create(txn_keys.stream, txn_keys.group, id="0", mkstream=True)
    config = BackpressureConfig.from_settings(make_settings(worker_concurrency=8))
    guard = BackpressureGuard(redis_client, txn_keys, config)
    assert guard.wait_before_batch(1_000) == 200  # no rate yet: two reads of 100
    assert guard.allowance == 0


def test_a_cut_in_the_consumers_speed_shrinks_the_set_point_within_seconds(
    redis_client: RedisClient, txn_keys: StreamKeys, make_guard: Callable[..., BackpressureGuard]
) -> None:
    """The capacity cut's case: consumers at 1,000 rows/s drop to 100. The published rate
    averages 10 s; the set point must not keep the old speed's second of work that long,
    or the lag the producer steers to is 10 s of work at the new one."""
    redis_client.xgroup_create(txn_keys.stream, txn_keys.group, id="0", mkstream=True)
    rate, done = [1_000.0], threading.Event()

    def consume() -> None:
        client = redis_client.client()
        while not done.is_set():
            got = client.xreadgroup(
                txn_keys.group, "c1", {txn_keys.stream: ">"}, count=10, block=50
            )
            ids = [i for _, entries in got for i, _ in entries]
            if ids:
                client.xack(txn_keys.stream, txn_keys.group, *ids)
                done.wait(len(ids) / rate[0])

    guard = make_guard(should_stop=done.is_set, **SECONDS)
    entries = ({"data": f'{{"n":{i}}}'} for i in range(10**9))
    threads = [
        threading.Thread(target=consume, daemon=True),
        threading.Thread(
            target=lambda: _suppressed(
                lambda: publish_rows(redis_client, txn_keys, entries, 100, guard)
            ),
            daemon=True,
        ),
    ]
    for thread in threads:
        thread.start()
    try:
        wait_until(lambda: (guard.drain_rate or 0) > 500, 20, what="the fast rate measured")
        done.wait(6.0)  # the fast phase fills most of the published rate's 10 s window
        rate[0] = 100.0
        cut = time.monotonic()
        wait_until(
            lambda: guard.current_limits().set_point < 250, 8, what="steering to the new rate"
        )
        assert time.monotonic() - cut < 5.0  # the fast window (2 s) and a reading or two
        # the stop stays at the published window's rate: no false hard stop on a dip
        assert guard.current_limits().lag_pause > 1_000
    finally:
        done.set()
        for thread in threads:
            thread.join(timeout=10)


def _suppressed(action: Callable[[], Any]) -> None:
    with contextlib.suppress(PublishInterrupted):  # the test's end stopped the publish
        action()
