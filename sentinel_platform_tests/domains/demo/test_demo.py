"""The demo schedule: a small, valid batch per tick, new data each tick, and it waits
whenever the lag gate would."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta, timezone

import dagster as dg
import pytest

from sentinel_platform.domains.demo import schedule as demo
from sentinel_platform.domains.demo.traffic import ASSET_NAME, demo_figures, demo_traffic
from sentinel_platform.domains.shared.common import DAILY
from sentinel_platform.domains.shared.resources import data_resources
from sentinel_platform.resources.settings import SettingsResource
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform.streams.producer.publish import PublishStats

TICK = datetime(2026, 3, 10, 12, 5, tzinfo=timezone.utc)


def _evaluate(tick: datetime) -> dg.RunRequest | dg.SkipReason:
    """One tick of the schedule, its settings read from the environment as when deployed."""
    context = dg.build_schedule_context(
        scheduled_execution_time=tick, resources={"settings": SettingsResource()}
    )
    result = demo.build_demo_schedule(running=True)(context)
    assert isinstance(result, (dg.RunRequest, dg.SkipReason))
    return result


def test_demo_tick_requests_a_small_run_whose_config_the_job_accepts(
    settings_env: dict[str, str], settings: Settings, redis_client: RedisClient
) -> None:
    request = _evaluate(TICK)
    assert isinstance(request, dg.RunRequest)
    assert request.partition_key in DAILY.get_partition_keys(current_time=TICK)
    steps = request.run_config["ops"][ASSET_NAME]["ops"]
    assert set(steps) == {"demo_transactions", "demo_axioms"}
    assert all(step["config"]["transactions"] <= 1000 for step in steps.values())
    job = dg.Definitions(
        assets=[demo_traffic],
        jobs=[demo.demo_publish],
        resources=data_resources(SettingsResource()),
    ).resolve_job_def(demo.JOB_NAME)
    assert dg.validate_run_config(job, request.run_config)
    assert {key.to_user_string() for key in job.asset_layer.executable_asset_keys} == {ASSET_NAME}


def test_consecutive_demo_ticks_publish_different_data() -> None:
    ticks = [TICK + timedelta(minutes=demo.EVERY_MINUTES * n) for n in range(3)]
    assert len({demo.demo_partition(t) for t in ticks}) == 3


def test_demo_tick_is_skipped_while_producers_are_paused(
    settings_env: dict[str, str], redis_client: RedisClient, tx_keys: StreamKeys
) -> None:
    redis_client.set(tx_keys.paused, "operator", ex=60)
    result = _evaluate(TICK)
    assert isinstance(result, dg.SkipReason)
    assert "paused" in (result.skip_message or "")


def test_demo_tick_is_skipped_while_lag_is_not_nominal(
    settings_env: dict[str, str],
    redis_client: RedisClient,
    tx_keys: StreamKeys,
    monkeypatch: pytest.MonkeyPatch,
    live_worker: Callable[[StreamKeys, str], None],
) -> None:
    monkeypatch.setenv("SENTINEL_LAG_WARN", "2")
    monkeypatch.setenv("SENTINEL_LAG_PAUSE", "4")
    live_worker(tx_keys, "worker-a")
    for n in range(3):
        redis_client.xadd(tx_keys.stream, {"data": f'{{"id": "{n}"}}'})
    result = _evaluate(TICK)
    assert isinstance(result, dg.SkipReason)
    assert "elevated" in (result.skip_message or "")


def test_demo_publishes_the_current_day_so_the_latest_materialization_is_today() -> None:
    ticks = [TICK + timedelta(minutes=demo.EVERY_MINUTES * n) for n in range(3)]
    assert {demo.demo_partition(t)[0] for t in ticks} == {TICK.date().isoformat()}
    assert len({demo.demo_partition(t)[1] for t in ticks}) == 3  # a new seed, new data


@pytest.mark.parametrize(
    "stats",
    [
        PublishStats(rows=200, wall_s=4.0, paused_s=3.5, partitions=1),
        # two partitions paused at the same time: their waits sum past the run's duration
        PublishStats(rows=200, wall_s=4.0, paused_s=7.2, partitions=2),
        PublishStats(partitions=0),
    ],
)
def test_the_demos_paused_figure_is_per_partition_and_never_exceeds_its_duration(
    stats: PublishStats,
) -> None:
    figures = demo_figures("transactions", stats)
    assert figures["transactions_published"] == float(stats.rows)
    assert figures["transactions_paused_s_per_partition"] <= max(stats.wall_s, 0.0)
