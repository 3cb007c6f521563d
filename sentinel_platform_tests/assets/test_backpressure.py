"""The producer guard against a real Redis, with the lag key and pause flag driven by the test."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import pytest

from sentinel_platform.streams.backpressure import (
    BackpressureConfig,
    BackpressureGuard,
    BackpressureTimeout,
    PublishInterrupted,
)
from sentinel_platform.streams.connection import RedisClient
from sentinel_platform.streams.keys import StreamKeys
from sentinel_platform.streams.publish import PartitionPublisher, publish_rows, stop_key

Later = Callable[[float, Callable[[], Any]], None]


def _entries(n: int) -> list[dict[str, str]]:
    return [{"data": f'{{"n":{i}}}'} for i in range(n)]


def _timed(action: Callable[[], Any]) -> tuple[Any, float]:
    started = time.monotonic()
    result = action()
    return result, time.monotonic() - started


def test_nominal_lag_publishes_every_batch_without_waiting(
    redis_client: RedisClient, txn_keys: StreamKeys, make_guard: Callable[..., BackpressureGuard]
) -> None:
    redis_client.set(txn_keys.lag, 0)
    guard = make_guard()
    stats = publish_rows(redis_client, txn_keys, _entries(2_000), 250, guard)
    # Batches are capped at the head-room below the hard limit (200 - 0), not 250.
    assert stats.rows == 2_000 and stats.batches == 10
    assert redis_client.xlen(txn_keys.stream) == 2_000
    assert (stats.soft_events, stats.hard_events) == (0, 0)
    assert stats.paused_s == 0 and stats.slowed_s == 0


def test_soft_limit_sleep_grows_with_lag_and_batch_shrinks_to_headroom(
    redis_client: RedisClient, txn_keys: StreamKeys, make_guard: Callable[..., BackpressureGuard]
) -> None:
    guard = make_guard(lag_warn=50, lag_pause=200, lag_warn_sleep_ms=400)
    redis_client.set(txn_keys.lag, 60)
    low_budget, low_s = _timed(lambda: guard.wait_before_batch(500))
    redis_client.set(txn_keys.lag, 190)
    high_budget, high_s = _timed(lambda: guard.wait_before_batch(500))
    # 400 ms * (60-50)/150 ~ 27 ms versus 400 ms * (190-50)/150 ~ 373 ms.
    assert low_s < 0.15 < 0.3 < high_s
    assert (low_budget, high_budget) == (140, 10)
    assert guard.stats.soft_events == 1  # one episode, however many batches
    assert guard.stats.hard_events == 0


def test_fixed_mode_sleeps_the_same_at_any_soft_lag(
    redis_client: RedisClient, txn_keys: StreamKeys, make_guard: Callable[..., BackpressureGuard]
) -> None:
    guard = make_guard(lag_warn_sleep_ms=200, mode="fixed")
    redis_client.set(txn_keys.lag, 51)
    budget, waited = _timed(lambda: guard.wait_before_batch(500))
    assert budget == 500 and waited >= 0.19


def test_soft_episode_is_logged_once_and_counted_once(
    redis_client: RedisClient,
    txn_keys: StreamKeys,
    make_guard: Callable[..., BackpressureGuard],
    caplog: pytest.LogCaptureFixture,
) -> None:
    guard = make_guard(lag_warn_sleep_ms=10)
    caplog.set_level(logging.INFO, logger="sentinel_platform.streams.backpressure")
    for lag in (80, 90, 45, 100, 0, 120, 130):  # 45: hovering near warn, same episode
        redis_client.set(txn_keys.lag, lag)
        guard.wait_before_batch(100)
    warnings = [r for r in caplog.records if "soft limit, slowing" in r.getMessage()]
    endings = [r for r in caplog.records if "back to nominal" in r.getMessage()]
    assert guard.stats.soft_events == 2 and len(warnings) == 2 and len(endings) == 1
    assert warnings[0].stream == txn_keys.stream and warnings[0].lag == 80


def test_rows_sent_after_the_worker_wrote_the_lag_key_count_as_lag(
    redis_client: RedisClient, txn_keys: StreamKeys, make_guard: Callable[..., BackpressureGuard]
) -> None:
    redis_client.set(txn_keys.lag, 0, ex=10)  # as a worker writes it
    guard = make_guard()
    publish_rows(redis_client, txn_keys, _entries(150), 100, guard)
    signal = guard.read_signal()
    assert (signal.lag, signal.unseen) == (150, 150)
    redis_client.set(txn_keys.lag, 20, ex=10)  # the worker's next snapshot includes them
    assert guard.read_signal().lag == 20
    redis_client.set(txn_keys.lag, 20)  # no TTL: age unknown, taken as current
    assert guard.read_signal().lag == 20


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
    assert budget == 100  # lag 100 is in the soft band: the batch is cut to the head-room
    assert guard.stats.soft_events == 1


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
        kind="transactions",
        config=BackpressureConfig(lag_pause_poll_ms=30_000, max_pause_s=60),
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
    assert (signal.source, signal.lag) == ("measured", 300)
    budget, waited = _timed(lambda: guard.wait_before_batch(100))
    assert waited >= 0.38 and budget == 100
    assert guard.stats.hard_events == 1 and guard.stats.max_lag == 300


def test_missing_lag_key_with_small_backlog_publishes_freely(
    redis_client: RedisClient, txn_keys: StreamKeys, make_guard: Callable[..., BackpressureGuard]
) -> None:
    guard = make_guard(max_pause_s=0.3)
    stats = publish_rows(redis_client, txn_keys, _entries(40), 10, guard)
    assert stats.rows == 40 and stats.hard_events == 0 and stats.soft_events == 0


def test_config_rejects_warn_not_below_pause() -> None:
    with pytest.raises(ValueError, match="lag_warn"):
        BackpressureConfig(lag_warn=200, lag_pause=200)
