"""Every Spark step of a run uses the configured session, whatever the executor.

The trap: a stray default session. ``PYSPARK_SUBMIT_ARGS`` points any *unconfigured*
SparkSession at a master that does not exist, while ``SENTINEL_SPARK_MASTER=local[2]``
configures the platform's one. A step that built its own default session (instead of
taking the configured one from the ``pyspark`` resource) fails to connect, and the run
with it. Each step's materialisation or check result names the master, the application
and the session time zone it ran with.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sentinel_platform.domains.shared.execution import MULTIPROCESS
from sentinel_platform.redis_server import free_port
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import axiom_keys
from sentinel_platform_tests.harness.dagster_cli import StepRecord, last_run_records, materialize

# A multiprocess run starts one Spark driver per step, one after another: about 90 s alone,
# over three times that beside the suite's other Spark and Dagster tests on 2 cores.
pytestmark = [pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(900)]
RUN_BUDGET_S = 780
DAY = "2026-11-20"
SELECT = "telemetry_readings,axioms,axiom_stream"
SMALL = {"ops": {"telemetry_readings": {"config": {"sources": 3, "readings_per_source": 60}}}}
SPARK_STEPS = {"telemetry_readings", "axioms", "axioms_axioms_quality", "axiom_stream"}


@pytest.fixture
def dead_master_env(
    settings: Settings, settings_env: dict[str, str], redis_client: RedisClient
) -> dict[str, str]:
    """The platform configured for ``local[2]``; any default session aimed at a dead master."""
    redis_client.set(axiom_keys(settings).lag, 0)  # an idle consumer: publishing may proceed
    return {
        **settings_env,
        "PYSPARK_SUBMIT_ARGS": f"--master spark://127.0.0.1:{free_port()} pyspark-shell",
        "SENTINEL_SPARK_MASTER": "local[2]",
        "SENTINEL_SPARK_CONF": "spark.driver.memory=512m,spark.sql.shuffle.partitions=2",
        "SENTINEL_LAG_WARN": "5000",
        "SENTINEL_LAG_PAUSE": "10000",
    }


def _steps(records: list[StepRecord]) -> dict[str, list[StepRecord]]:
    by_step: dict[str, list[StepRecord]] = {}
    for record in records:
        by_step.setdefault(record.step, []).append(record)
    return by_step


def _assert_configured_session_in_every_step(records: list[StepRecord]) -> set[str]:
    """Each Spark step reported local[2] and UTC; returns the application ids seen."""
    by_step = _steps(records)
    assert set(by_step) >= SPARK_STEPS, sorted(by_step)
    apps = set()
    for step in SPARK_STEPS:
        for record in by_step[step]:
            assert record.metadata["spark/master"] == "local[2]", (step, record.metadata)
            assert record.metadata["spark/session_time_zone"] == "UTC", (step, record.metadata)
            apps.add(record.metadata["spark/application_id"])
    return apps


def test_every_step_of_a_multiprocess_run_uses_the_configured_session(
    dead_master_env: dict[str, str], redis_client: RedisClient, settings: Settings, tmp_path: Path
) -> None:
    done = materialize(
        SELECT, DAY, dead_master_env, tmp_path / "dagster", {**MULTIPROCESS, **SMALL}, RUN_BUDGET_S
    )
    assert done.returncode == 0, done.stdout[-5000:]
    assert "Failed to connect to master" not in done.stdout

    apps = _assert_configured_session_in_every_step(last_run_records(tmp_path / "dagster"))
    assert len(apps) == len(SPARK_STEPS)  # one process, hence one driver, per step
    assert redis_client.xlen(axiom_keys(settings).stream) > 0


def test_the_code_locations_executor_runs_a_whole_run_in_one_session(
    dead_master_env: dict[str, str], redis_client: RedisClient, settings: Settings, tmp_path: Path
) -> None:
    # No execution config: what the UI's Materialize, sensors and schedules get.
    done = materialize(SELECT, DAY, dead_master_env, tmp_path / "dagster", SMALL, RUN_BUDGET_S)
    assert done.returncode == 0, done.stdout[-5000:]

    apps = _assert_configured_session_in_every_step(last_run_records(tmp_path / "dagster"))
    assert len(apps) == 1, apps
    assert redis_client.xlen(axiom_keys(settings).stream) > 0
