"""Lag spikes between two sensor ticks are kept: on the plot, in the zone, in one alert."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import dagster as dg

from sentinel_platform.domains.operations.dead_letters import dead_letter_queue_sensor
from sentinel_platform.domains.operations.delivery import build_delivery_sensor
from sentinel_platform.domains.operations.lag_gate import SENSOR_NAME, build_lag_sensor
from sentinel_platform.domains.operations.stream_health import DELIVERY_CHECK, DLQ_CHECK, LAG_CHECK
from sentinel_platform.domains.operations.targets import TRANSACTIONS
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.lag import measure_lag, read_lag_key, write_lag_key
from sentinel_platform.streams.backlog.peaks import HARD, peaks_key
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform.streams.producer.backpressure import BackpressureGuard
from sentinel_platform.streams.producer.pacing_limits import BackpressureConfig
from sentinel_platform_tests.harness.operations import (
    LAG_THRESHOLDS,
    axiom_stream,
    observations,
    publish_transactions,
    read_alerts,
    tick,
    transaction_stream,
)
from sentinel_platform_tests.harness.processes import NOOP_PROCESSOR
from sentinel_platform_tests.harness.streams import publish
from sentinel_platform_tests.harness.waits import wait_until


def _drained(client: RedisClient, keys: StreamKeys) -> bool:
    """Consumed and acked, and the worker has said so in its lag key."""
    return measure_lag(client, keys).lag == 0 and read_lag_key(client, keys) == 0


def _burst(client: RedisClient, keys: StreamKeys, n: int, round_: int) -> None:
    publish(client, keys, [{"key": f"r{round_}-{i}"} for i in range(n)])


def test_spike_drained_between_ticks_is_plotted_as_lag_peak_and_alerted_once(
    redis_client: RedisClient,
    txn_group: StreamKeys,
    settings: Settings,
    make_resources,
    dagster_instance,
    clock,
    start_worker,
) -> None:
    keys = txn_group
    worker = start_worker(
        processor=NOOP_PROCESSOR,
        env={"SENTINEL_SIMULATE_LATENCY_MS": "20"},
        args=("--count", "5"),
    )
    worker.wait_ready(redis_client)
    resources = make_resources(**LAG_THRESHOLDS)
    sensor = build_lag_sensor([TRANSACTIONS], clock=clock)
    cursor = tick(sensor, dagster_instance, resources, None).cursor

    peaks: list[dict[str, Any]] = []
    for round_ in range(2):  # two spikes, each drained before the next tick
        _burst(redis_client, keys, 40, round_)
        wait_until(lambda: _drained(redis_client, keys), timeout_s=30)
        clock.now += timedelta(seconds=15)
        data = tick(sensor, dagster_instance, resources, cursor)
        cursor = data.cursor
        (obs,) = observations(data, TRANSACTIONS.asset_key)
        peaks.append(obs)

    for obs in peaks:
        assert obs["lag"] == 0 and obs["zone"] == "nominal"
        assert obs["lag_peak"] >= LAG_THRESHOLDS["lag_pause"]
        assert obs["peak_zone"] == "backpressure" and obs["peak_zone_level"] == 2
    (alert,) = read_alerts(redis_client, settings, SENSOR_NAME)  # the cool-down holds the 2nd
    assert alert.severity == "error" and alert.condition == "hard_backpressure"
    assert alert.details["lag_peak"] == peaks[0]["lag_peak"]

    # The peak falls back to the lag once (a change), then nothing floods the Events list ...
    clock.now += timedelta(seconds=15)
    settled = tick(sensor, dagster_instance, resources, cursor)
    (calm,) = observations(settled, TRANSACTIONS.asset_key)
    assert calm["lag_peak"] == calm["lag"] == 0
    clock.now += timedelta(seconds=15)
    quiet = tick(sensor, dagster_instance, resources, settled.cursor)
    assert observations(quiet, TRANSACTIONS.asset_key) == []
    # ... until the longest gap has passed.
    clock.now += timedelta(seconds=settings.observation_max_interval_s)
    (again,) = observations(
        tick(sensor, dagster_instance, resources, quiet.cursor), TRANSACTIONS.asset_key
    )
    assert again["lag"] == 0 and again["lag_peak"] == 0


def test_producer_hard_stop_between_ticks_is_counted_as_an_episode(
    redis_client: RedisClient,
    txn_group: StreamKeys,
    settings: Settings,
    make_resources,
    dagster_instance,
    clock,
) -> None:
    keys = txn_group
    write_lag_key(redis_client, keys, 12, ttl_s=10)
    guard = BackpressureGuard(redis_client, keys, BackpressureConfig(lag_warn=5, lag_pause=10))
    producer = threading.Thread(target=guard.wait_before_batch, args=(100,), daemon=True)
    producer.start()
    wait_until(lambda: redis_client.zscore(peaks_key(keys), HARD) == 1)
    write_lag_key(redis_client, keys, 0, ttl_s=10)  # the workers caught up
    producer.join(timeout=10)
    assert not producer.is_alive() and guard.stats.hard_events == 1

    data = tick(
        sensor := build_lag_sensor([TRANSACTIONS], clock=clock),
        dagster_instance,
        make_resources(**LAG_THRESHOLDS),
        None,
    )
    (obs,) = observations(data, TRANSACTIONS.asset_key)
    assert obs["lag"] == 0 and obs["lag_peak"] == 12
    assert obs["hard_backpressure_episodes"] == 1
    (alert,) = read_alerts(redis_client, settings, sensor.name)
    assert alert.details["hard_backpressure_episodes"] == 1
    assert "1 hard backpressure episode" in alert.summary
    # Read and reset: the next tick reports no episode twice.
    assert not redis_client.exists(peaks_key(keys))


def named_target(record: Any) -> int | None:
    """The storage id of the materialisation a stored check evaluation names, if any."""
    evaluation = record.event.dagster_event.event_specific_data
    target = evaluation.target_materialization_data
    return target.storage_id if target else None


def test_check_evaluations_name_the_latest_materialization(
    redis_client: RedisClient, txn_group: StreamKeys, make_resources, dagster_instance, clock
) -> None:
    """The UI's "latest execution" of a check is the evaluation about the latest
    materialisation; a sensor's evaluation must say which one it saw."""
    resources = make_resources(**LAG_THRESHOLDS)
    sensors = [
        build_lag_sensor([TRANSACTIONS], clock=clock),
        dead_letter_queue_sensor,
        build_delivery_sensor([TRANSACTIONS]),
    ]
    checks = [
        dg.AssetCheckKey(TRANSACTIONS.asset_key, n) for n in (LAG_CHECK, DLQ_CHECK, DELIVERY_CHECK)
    ]
    cursors: dict[str, str | None] = {}

    def run_sensors() -> None:
        for sensor in sensors:
            data = tick(sensor, dagster_instance, resources, cursors.get(sensor.name))
            cursors[sensor.name] = data.cursor
            for event in data.asset_events:  # what the sensor daemon does with them
                dagster_instance.report_runless_asset_event(event)

    def latest_state_is_about_latest_materialization() -> list[bool]:
        """Whether each check's latest evaluation names the latest materialisation, which is
        what the UI's "latest execution" goes by (falling back to whole-second times when an
        evaluation names none)."""
        latest = dagster_instance.fetch_materializations(
            dg.AssetRecordsFilter(asset_key=TRANSACTIONS.asset_key), limit=1
        ).records[0]
        records = dagster_instance.event_log_storage.get_latest_asset_check_execution_by_key(checks)
        return [named_target(records[key]) == latest.storage_id for key in checks]

    job = dg.Definitions(
        assets=[transaction_stream, axiom_stream], jobs=[publish_transactions]
    ).resolve_job_def(publish_transactions.name)

    def materialize() -> None:
        """A real run, as the UI or the lag gate launches it."""
        result = job.execute_in_process(instance=dagster_instance, partition_key="2026-01-09")
        assert result.success

    materialize()
    # At once: Dagster keeps an evaluation's time in whole seconds, and judges an evaluation
    # that names no materialisation by that time, so one in the same second reads as older.
    run_sensors()
    assert latest_state_is_about_latest_materialization() == [True, True, True]
    materialize()  # a new materialisation has not been checked yet ...
    assert latest_state_is_about_latest_materialization() == [False, False, False]
    clock.now += timedelta(seconds=15)
    run_sensors()  # ... until the next ticks, even with nothing else changed
    assert latest_state_is_about_latest_materialization() == [True, True, True]
