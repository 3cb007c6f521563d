"""The lag sensor records lag, pauses publishing and resumes held partitions exactly once."""

from __future__ import annotations

import json
from datetime import timedelta
from typing import Any

import dagster as dg
import pytest

from sentinel_platform.domains.operations.lag_gate import SENSOR_NAME, build_lag_sensor
from sentinel_platform.domains.operations.stream_health import LAG_CHECK
from sentinel_platform.domains.operations.targets import AXIOMS, TRANSACTIONS, PublishTarget
from sentinel_platform.resources.settings import SettingsResource
from sentinel_platform.resources.stream_inspector import StreamInspector
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.drain import write_drain_rate
from sentinel_platform.streams.backlog.lag import measure_lag, write_lag_key
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, axiom_keys, transaction_keys
from sentinel_platform_tests.harness.operations import (
    DAILY,
    LAG_THRESHOLDS,
    axiom_stream,
    observations,
    publish_transactions,
    read_alerts,
    tick,
    transaction_stream,
)


def drive_lag(client: RedisClient, keys: StreamKeys, target: int) -> int:
    """Make the group's real lag equal ``target`` (publish, or consume and ack), as reported."""
    lag = measure_lag(client, keys).lag
    for i in range(target - lag):
        client.xadd(keys.stream, {"data": f'{{"n": {i}}}'})
    if lag > target:
        read = client.xreadgroup(keys.group, "worker-1", {keys.stream: ">"}, count=lag - target)
        ids = [entry_id for _, entries in read for entry_id, _ in entries]
        client.xack(keys.stream, keys.group, *ids)
    measured = measure_lag(client, keys).lag
    write_lag_key(client, keys, measured, ttl_s=10)
    return measured


def lag_evaluations(data: Any) -> list[dg.AssetCheckEvaluation]:
    return [
        e
        for e in data.asset_events
        if isinstance(e, dg.AssetCheckEvaluation) and e.check_name == LAG_CHECK
    ]


def test_lag_through_warn_and_pause_pauses_then_resumes_held_partition_once(
    redis_client: RedisClient,
    txn_group: StreamKeys,
    settings: Settings,
    make_resources,
    dagster_instance,
    clock,
) -> None:
    keys = txn_group
    resources = make_resources(**LAG_THRESHOLDS)
    publish = {"transactions": PublishTarget(publish_transactions, DAILY)}
    sensor = build_lag_sensor([TRANSACTIONS], publish, clock=clock)
    defs = dg.Definitions(
        assets=[transaction_stream, axiom_stream], jobs=[publish_transactions], sensors=[sensor]
    )

    cursor = None
    series, zones, runs_per_tick = [], [], []
    flag_during: list[bool] = []
    for step, target in enumerate([2, 6, 12, 7, 1, 1]):
        drive_lag(redis_client, keys, target)
        if step == 2:
            clock.now += timedelta(days=1)  # a partition comes due while paused
        data = tick(sensor, dagster_instance, resources, cursor, defs)
        cursor = data.cursor
        recorded = observations(data, TRANSACTIONS.asset_key)
        series.append(recorded[0]["lag"] if recorded else None)
        zones.append(recorded[0]["zone"] if recorded else None)
        runs_per_tick.append([r.run_key for r in data.run_requests or []])
        flag_during.append(redis_client.exists(keys.paused) == 1)

    # the last tick changed nothing, so it records no observation (the clock stood still)
    assert series == [2, 6, 12, 7, 1, None]
    assert zones == ["nominal", "elevated", "backpressure", "elevated", "nominal", None]
    # paused from backpressure until back at nominal (not merely elevated)
    assert flag_during == [False, False, True, True, False, False]
    assert redis_client.ttl(keys.paused) == -2
    # the first tick launches nothing unasked (a fresh gate notes today's partition); none
    # while paused; the partition that came due during the pause is resumed once; none after
    assert runs_per_tick[0] == []
    assert runs_per_tick[1:4] == [[], [], []]
    assert len(runs_per_tick[4]) == 1 and runs_per_tick[4][0].startswith(
        "resume:transactions:2026-01-10:"
    )
    assert runs_per_tick[5] == []

    alerts = read_alerts(redis_client, settings, SENSOR_NAME)
    actions = [a.details["action"] for a in alerts]
    assert actions.count("pause") == 1
    assert actions.count("resume") == 1
    assert [a.details["zone"] for a in alerts] == [
        "elevated",
        "backpressure",
        "elevated",
        "nominal",
    ]
    assert alerts[1].severity == "error" and alerts[3].severity == "info"
    assert alerts[3].details["relaunched_partitions"] == ["2026-01-10"]


def test_lag_check_evaluated_every_tick_with_severity_by_zone(
    redis_client: RedisClient, txn_group: StreamKeys, make_resources, dagster_instance, clock
) -> None:
    keys = txn_group
    resources = make_resources(**LAG_THRESHOLDS)
    sensor = build_lag_sensor([TRANSACTIONS], clock=clock)
    cursor = None
    verdicts = []
    for target in (0, 5, 10):
        drive_lag(redis_client, keys, target)
        data = tick(sensor, dagster_instance, resources, cursor)
        cursor = data.cursor
        (evaluation,) = lag_evaluations(data)
        verdicts.append((evaluation.passed, evaluation.severity, evaluation.blocking))
        assert data.skip_message and "transactions" in data.skip_message
    warn = dg.AssetCheckSeverity.WARN
    assert verdicts == [(True, warn, True), (False, warn, True), (False, warn, True)]


def test_no_live_worker_pauses_publishing_and_holds_due_partitions(
    redis_client: RedisClient, settings: Settings, make_resources, dagster_instance, clock
) -> None:
    keys = axiom_keys(settings)
    redis_client.xadd(keys.stream, {"status": "nominal"})  # backlog, but nobody consumes
    resources = make_resources(**LAG_THRESHOLDS)
    job = dg.define_asset_job("publish_axioms", selection=[AXIOMS.asset_key], partitions_def=DAILY)
    sensor = build_lag_sensor([AXIOMS], {"axioms": PublishTarget(job, DAILY)}, clock=clock)
    defs = dg.Definitions(assets=[axiom_stream], jobs=[job], sensors=[sensor])

    first = tick(sensor, dagster_instance, resources, None, defs)
    clock.now += timedelta(days=1)
    second = tick(sensor, dagster_instance, resources, first.cursor, defs)

    assert not first.run_requests and not second.run_requests
    (obs,) = observations(first, AXIOMS.asset_key)
    assert obs["zone"] == "worker_off" and obs["backlog"] == 1 and obs["consumers_alive"] == 0
    assert redis_client.get(keys.paused).startswith("sensor:worker_off:")
    # the partition due at start-up was never asked for; the one due next day is held
    assert "1 partition(s) held" in second.skip_message
    (alert,) = read_alerts(redis_client, settings, SENSOR_NAME)
    assert alert.details["action"] == "pause" and alert.stream == keys.stream


def test_operator_pause_flag_is_left_in_place(
    redis_client: RedisClient, txn_group: StreamKeys, make_resources, dagster_instance, clock
) -> None:
    keys = txn_group
    drive_lag(redis_client, keys, 0)
    redis_client.set(keys.paused, "operator")
    sensor = build_lag_sensor([TRANSACTIONS], clock=clock)
    tick(sensor, dagster_instance, make_resources(**LAG_THRESHOLDS), None)
    assert redis_client.get(keys.paused) == "operator"


def test_expired_lag_key_with_a_live_lease_is_judged_on_the_group_not_worker_off(
    redis_client: RedisClient, txn_group: StreamKeys, make_resources, dagster_instance, clock
) -> None:
    keys = txn_group
    drive_lag(redis_client, keys, 3)
    redis_client.delete(keys.lag)  # a slow message outlived the key's TTL...
    redis_client.hset(keys.consumers, "worker-1", "pid")
    redis_client.set(keys.lease("worker-1"), "1", px=60_000)  # ...but the worker is alive
    sensor = build_lag_sensor([TRANSACTIONS], clock=clock)

    data = tick(sensor, dagster_instance, make_resources(**LAG_THRESHOLDS), None)

    (obs,) = observations(data, TRANSACTIONS.asset_key)
    assert obs["zone"] == "nominal" and obs["lag"] == 3 and obs["consumers_alive"] == 1
    assert obs["worker_reported"] is False
    assert redis_client.exists(keys.paused) == 0


@dg.asset(key=TRANSACTIONS.asset_key, partitions_def=DAILY)
def pause_aware_stream(settings: SettingsResource, stream_inspector: StreamInspector) -> None:
    """Stand-in publisher that gives up while the pause flag is set (max_pause_s exceeded)."""
    current = settings.load()
    with stream_inspector.client(current) as client:
        if client.exists(transaction_keys(current).paused):
            raise RuntimeError("producer paused longer than SENTINEL_MAX_PAUSE_S")


def test_publish_run_that_failed_during_a_pause_is_relaunched_once_on_resume(
    redis_client: RedisClient, txn_group: StreamKeys, make_resources, dagster_instance, clock
) -> None:
    keys = txn_group
    resources = make_resources(**LAG_THRESHOLDS)
    job = dg.define_asset_job(
        "publish_transactions", selection=[TRANSACTIONS.asset_key], partitions_def=DAILY
    )
    defs = dg.Definitions(assets=[pause_aware_stream], jobs=[job], resources=resources)
    sensor = build_lag_sensor([TRANSACTIONS], {"transactions": PublishTarget(job, DAILY)}, clock)

    drive_lag(redis_client, keys, 1)
    first = tick(sensor, dagster_instance, resources, None, defs)
    drive_lag(redis_client, keys, 12)
    paused = tick(sensor, dagster_instance, resources, first.cursor, defs)
    failed = defs.resolve_job_def(job.name).execute_in_process(
        instance=dagster_instance,
        partition_key="2026-01-09",
        tags={"sentinel/stream": "transactions"},
        raise_on_error=False,
    )
    assert not failed.success
    drive_lag(redis_client, keys, 0)
    resumed = tick(sensor, dagster_instance, resources, paused.cursor, defs)
    after = tick(sensor, dagster_instance, resources, resumed.cursor, defs)

    assert not first.run_requests  # a fresh gate launches nothing unasked
    assert not paused.run_requests
    (relaunch,) = resumed.run_requests
    assert relaunch.partition_key == "2026-01-09" and relaunch.run_key.startswith("resume:")
    assert not after.run_requests


def test_pause_flag_set_by_the_sensor_is_cleared_even_after_a_lost_cursor(
    redis_client: RedisClient,
    txn_group: StreamKeys,
    settings: Settings,
    make_resources,
    dagster_instance,
    clock,
) -> None:
    keys = txn_group
    resources = make_resources(**LAG_THRESHOLDS)
    sensor = build_lag_sensor([TRANSACTIONS], clock=clock)
    drive_lag(redis_client, keys, 12)
    tick(sensor, dagster_instance, resources, None)
    assert redis_client.exists(keys.paused)

    drive_lag(redis_client, keys, 0)
    tick(sensor, dagster_instance, resources, None)  # cursor reset by an operator

    assert not redis_client.exists(keys.paused)
    actions = [a.details["action"] for a in read_alerts(redis_client, settings, SENSOR_NAME)]
    assert actions == ["pause", "resume"]


def test_first_format_cursor_resumes_its_held_partition_and_is_rewritten(
    redis_client: RedisClient, txn_group: StreamKeys, make_resources, dagster_instance, clock
) -> None:
    keys = txn_group
    episode = "1767960000000"
    redis_client.set(keys.paused, f"sensor:backpressure:{episode}")
    first_format = {
        "zone": "elevated",
        "paused": True,
        "episode": episode,
        "held": ["2026-01-09"],
        "last_due": "2026-01-09",
        "observed": None,
        "observed_at": None,
    }
    publish = {"transactions": PublishTarget(publish_transactions, DAILY)}
    sensor = build_lag_sensor([TRANSACTIONS], publish, clock=clock)
    defs = dg.Definitions(assets=[transaction_stream], jobs=[publish_transactions])
    drive_lag(redis_client, keys, 0)

    data = tick(
        sensor,
        dagster_instance,
        make_resources(**LAG_THRESHOLDS),
        json.dumps({"streams": {"transactions": first_format}}),
        defs,
    )

    assert [r.run_key for r in data.run_requests] == [f"resume:transactions:2026-01-09:{episode}"]
    assert not redis_client.exists(keys.paused)
    stored = json.loads(data.cursor)["streams"]["transactions"]
    assert stored["format"] == 2 and stored["paused"] is False
    assert stored["relaunched"] == ["2026-01-09"]


@pytest.mark.parametrize(
    "cursor",
    [
        pytest.param({"streams": ["transactions"]}, id="streams-not-an-object"),
        pytest.param(
            {"streams": {"transactions": {"paused": True, "episode": "x", "held": "2026-01-09"}}},
            id="stream-state-of-the-wrong-shape",
        ),
    ],
)
def test_cursor_of_the_wrong_shape_starts_fresh_instead_of_failing_every_tick(
    redis_client: RedisClient,
    txn_group: StreamKeys,
    make_resources,
    dagster_instance,
    clock,
    cursor: dict[str, Any],
) -> None:
    keys = txn_group
    publish = {"transactions": PublishTarget(publish_transactions, DAILY)}
    sensor = build_lag_sensor([TRANSACTIONS], publish, clock=clock)
    defs = dg.Definitions(assets=[transaction_stream], jobs=[publish_transactions])
    drive_lag(redis_client, keys, 0)

    data = tick(
        sensor, dagster_instance, make_resources(**LAG_THRESHOLDS), json.dumps(cursor), defs
    )

    assert not data.run_requests  # fresh: today's partition is noted, not launched unasked
    stored = json.loads(data.cursor)["streams"]["transactions"]
    assert stored["paused"] is False and stored["last_due"] == "2026-01-09"


def test_cursor_stays_small_and_readable_on_the_sensor_page(
    redis_client: RedisClient, txn_group: StreamKeys, make_resources, dagster_instance, clock
) -> None:
    """The cursor is shown on the sensor's page: the figures it records go to the
    observation, the cursor keeps only a short digest of them (no JSON inside JSON)."""
    publish = {"transactions": PublishTarget(publish_transactions, DAILY)}
    sensor = build_lag_sensor([TRANSACTIONS, AXIOMS], publish, clock=clock)
    defs = dg.Definitions(assets=[transaction_stream, axiom_stream], jobs=[publish_transactions])
    resources = make_resources(**LAG_THRESHOLDS)
    drive_lag(redis_client, txn_group, 3)

    first = tick(sensor, dagster_instance, resources, None, defs)
    drive_lag(redis_client, txn_group, 5)
    second = tick(sensor, dagster_instance, resources, first.cursor, defs)

    assert observations(second, TRANSACTIONS.asset_key)  # a change is still recorded
    for data in (first, second):
        assert '\\"' not in data.cursor and "{\\" not in data.cursor, data.cursor
        assert len(data.cursor) <= 400, data.cursor
        for state in json.loads(data.cursor)["streams"].values():
            assert len(state["observed"]) <= 16


def test_time_limits_pause_a_pool_that_falls_behind_and_say_what_to_do(
    redis_client: RedisClient,
    txn_group: StreamKeys,
    settings: Settings,
    make_resources,
    dagster_instance,
    clock,
) -> None:
    """On the defaults (seconds of work) a pool behind by more than 10 s is paused and
    alerted as before; the alert gives the lag in both units and the operator's move."""
    keys = txn_group
    resources = make_resources()  # no count limits: 2 s / 10 s of work
    sensor = build_lag_sensor([TRANSACTIONS], clock=clock)
    drive_lag(redis_client, keys, 300)
    write_drain_rate(redis_client, keys, 100.0, 300)  # 3 s of work: elevated, not paused
    first = tick(sensor, dagster_instance, resources, None)
    (obs,) = observations(first, TRANSACTIONS.asset_key)
    assert (obs["zone"], obs["work_s"], obs["drain_rate_per_s"]) == ("elevated", 3.0, 100.0)
    assert not redis_client.exists(keys.paused)

    drive_lag(redis_client, keys, 1_200)  # 12 s of work at 100 rows/s
    clock.now += timedelta(seconds=15)
    tick(sensor, dagster_instance, resources, first.cursor)
    assert redis_client.get(keys.paused).startswith("sensor:backpressure:")
    pause = read_alerts(redis_client, settings, SENSOR_NAME)[-1]
    assert pause.severity == "error" and pause.details["action"] == "pause"
    assert "lag 1200 = 12 s of work at 100 rows/s (limits 2/10 s)" in pause.summary
    assert "To do: check the workers" in pause.summary
    assert "add workers or raise SENTINEL_WORKER_CONCURRENCY" in pause.summary
    assert "SENTINEL_WORKER_CONCURRENCY" in pause.details["advice"]


def test_idle_stream_reads_idle_with_no_drain_rate_sample(
    redis_client: RedisClient, txn_group: StreamKeys, make_resources, dagster_instance, clock
) -> None:
    """Nothing published, nothing pending: the check says so and the plots get no drain
    rate (nor the counts derived from it), instead of a drop to 0 that reads as consumers
    that stopped. Once there is work the figures come back."""
    keys = txn_group
    resources = make_resources()  # the defaults: limits in seconds of work
    sensor = build_lag_sensor([TRANSACTIONS], clock=clock)
    drive_lag(redis_client, keys, 0)
    write_drain_rate(redis_client, keys, 0.0, 0)  # the producers' last window drained nothing

    idle = tick(sensor, dagster_instance, resources, None)
    (obs,) = observations(idle, TRANSACTIONS.asset_key)
    (check,) = lag_evaluations(idle)
    assert obs["state"] == "idle" and obs["lag"] == 0 and obs["zone"] == "nominal"
    assert not {"drain_rate_per_s", "work_s", "lag_warn", "lag_pause"} & set(obs), obs
    assert check.passed and check.description.startswith("idle: nothing to drain"), check
    assert "drained nothing" not in (check.description or "")
    assert "transactions: idle (lag 0)" in (idle.skip_message or "")

    drive_lag(redis_client, keys, 300)
    write_drain_rate(redis_client, keys, 100.0, 300)
    clock.now += timedelta(seconds=15)
    busy = tick(sensor, dagster_instance, resources, idle.cursor)
    (obs,) = observations(busy, TRANSACTIONS.asset_key)
    assert obs["state"] == "active" and obs["drain_rate_per_s"] == 100.0 and obs["lag_pause"]
