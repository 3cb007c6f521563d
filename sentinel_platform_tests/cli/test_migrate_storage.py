"""An existing home moves from SQLite to a real PostgreSQL without losing its sensor
cursors, pool limits or run history: ``sentinel up`` refuses the switch until ``sentinel
migrate-storage`` has copied them, a second migration copies nothing twice, and one
killed mid-copy is finished by the next, every event exactly once."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import psycopg2
import pytest

from sentinel_platform.cli.dagster_home import ensure_dagster_home, storage_kind
from sentinel_platform.cli.main import main
from sentinel_platform.redis_server import free_port
from sentinel_platform_tests.cli.tiny_location import CHATTY_LINES
from sentinel_platform_tests.harness.postgres import PASSWORD, PASSWORD_IN_URL, PostgresServer
from sentinel_platform_tests.harness.sentinel_up import SENTINEL
from sentinel_platform_tests.harness.waits import wait_until

pytestmark = pytest.mark.slow  # Dagster's CLI as subprocesses

TINY = Path(__file__).with_name("tiny_location.py")
CURSOR = '{"last_dlq_id": "1732000000000-7"}'
PARTITIONS = ["2026-03-01", "2026-03-02"]


def _dagster(env: dict[str, str], *argv: str) -> None:
    subprocess.run(
        [sys.executable, "-m", "dagster", *argv, "-f", str(TINY)],
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )


def _cursors(instance: object) -> dict[str, str | None]:
    states = instance.all_instigator_state()  # type: ignore[attr-defined]
    return {
        state.name: getattr(state.instigator_data, "cursor", None)
        for state in states
        if state.instigator_data is not None
    }


def test_migrate_storage_keeps_cursors_and_history(
    tmp_path: Path,
    postgres_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    import dagster as dg

    from sentinel_platform_tests.cli import tiny_location

    home = tmp_path / "home"
    dagster_home = home / "dagster"
    monkeypatch.setenv("SENTINEL_HOME", str(home))
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))
    env = dict(os.environ)

    # A home that ran on SQLite: a sensor with a cursor, runs with materialised partitions.
    ensure_dagster_home(dagster_home)
    _dagster(env, "sensor", "start", "tiny_cursor_sensor")
    _dagster(env, "sensor", "cursor", "tiny_cursor_sensor", "--set", CURSOR)
    with dg.DagsterInstance.from_config(str(dagster_home)) as sqlite:
        for partition in PARTITIONS:
            dg.materialize(
                [tiny_location.tiny_partitioned], instance=sqlite, partition_key=partition
            )
        assert _cursors(sqlite)["tiny_cursor_sensor"] == CURSOR
        run_ids = {run.run_id for run in sqlite.get_runs()}
    assert len(run_ids) == 2

    # `sentinel up` refuses to point this home at PostgreSQL before the copy.
    monkeypatch.setenv("SENTINEL_DAGSTER_POSTGRES_URL", postgres_url)
    capsys.readouterr()
    assert main(["up", "--no-demo", "--port", str(free_port())]) == 1  # before Redis starts
    refused = capsys.readouterr().err
    assert "sentinel migrate-storage" in refused
    assert PASSWORD_IN_URL not in refused and PASSWORD not in refused
    assert storage_kind((dagster_home / "dagster.yaml").read_text()) == "sqlite"

    assert main(["migrate-storage"]) == 0
    said = capsys.readouterr().err
    assert "1 sensor/schedule state(s), 2 run(s)" in said
    assert PASSWORD_IN_URL not in said and PASSWORD not in said
    config = (dagster_home / "dagster.yaml").read_text()
    assert storage_kind(config) == "postgres" and PASSWORD_IN_URL not in config

    with dg.DagsterInstance.from_config(str(dagster_home)) as postgres:
        assert type(postgres.run_storage).__name__ == "PostgresRunStorage"
        assert _cursors(postgres)["tiny_cursor_sensor"] == CURSOR
        assert {run.run_id for run in postgres.get_runs()} == run_ids
        assert all(run.status == dg.DagsterRunStatus.SUCCESS for run in postgres.get_runs())
        key = dg.AssetKey("tiny_partitioned")
        assert postgres.get_materialized_partitions(key) == set(PARTITIONS)

    assert main(["migrate-storage"]) == 1  # the home is on PostgreSQL now: nothing to do
    assert "does not keep the instance in SQLite" in capsys.readouterr().err


INTERRUPTED_PARTITIONS = ["2026-04-01", "2026-04-02", "2026-04-03", "2026-04-04"]
POOL = ("sentinel-spark", 3)


def _events(instance: Any, run_id: str) -> list[tuple[str | None, str]]:
    """A run's events as comparable values, in storage order."""
    return [
        (entry.dagster_event_type and entry.dagster_event_type.value, entry.user_message)
        for entry in instance.all_logs(run_id)
    ]


def _created(instance: Any) -> dict[str, float]:
    """When each run was created, by run id."""
    return {
        r.dagster_run.run_id: r.create_timestamp.timestamp() for r in instance.get_run_records()
    }


def _materialised(instance: Any, key: Any) -> Counter[str | None]:
    """How often each partition of ``key`` was materialised, in the event log."""
    records = instance.fetch_materializations(key, limit=1000).records
    return Counter(record.partition_key for record in records)


def _sqlite_home_with_a_long_run(dagster_home: Path) -> tuple[list[str], str]:
    """A home on SQLite: four runs, each materialising one partition, the second of them
    with ``CHATTY_LINES`` log lines; a pool limit. Returns the run ids, oldest first,
    and the long run's id."""
    import dagster as dg

    from sentinel_platform_tests.cli import tiny_location

    ensure_dagster_home(dagster_home)
    with dg.DagsterInstance.from_config(str(dagster_home)) as sqlite:
        run_ids = []
        for partition in INTERRUPTED_PARTITIONS:
            long = partition == INTERRUPTED_PARTITIONS[1]
            asset = tiny_location.chatty_partitioned if long else tiny_location.tiny_partitioned
            result = dg.materialize([asset], instance=sqlite, partition_key=partition)
            run_ids.append(result.run_id)
        sqlite.event_log_storage.set_concurrency_slots(*POOL)
    return run_ids, run_ids[1]


def test_a_killed_migration_is_finished_by_the_next_one(
    tmp_path: Path,
    postgres_server: PostgresServer,
    postgres_url: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``sentinel migrate-storage`` SIGKILLed while it copies a run's events, then run
    again: every run has all its events exactly once and every partition one
    materialisation, as in SQLite."""
    import dagster as dg

    home = tmp_path / "home"
    dagster_home = home / "dagster"
    monkeypatch.setenv("SENTINEL_HOME", str(home))
    monkeypatch.setenv("DAGSTER_HOME", str(dagster_home))
    run_ids, long_run = _sqlite_home_with_a_long_run(dagster_home)
    with dg.DagsterInstance.from_config(str(dagster_home)) as sqlite:
        expected = {run_id: _events(sqlite, run_id) for run_id in run_ids}
        created = _created(sqlite)
    # its copy takes seconds (an event is a PostgreSQL connection and insert): killed inside it
    assert len(expected[long_run]) > CHATTY_LINES
    monkeypatch.setenv("SENTINEL_DAGSTER_POSTGRES_URL", postgres_url)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    database = postgres_url.rsplit("/", 1)[1]

    def copied_of_long_run() -> int:
        try:
            rows = postgres_server.query(
                "SELECT count(*) FROM event_logs WHERE run_id = %s", (long_run,), database
            )
        except psycopg2.errors.UndefinedTable:  # not created yet
            return 0
        return int(rows[0][0])

    first = subprocess.Popen(
        [str(SENTINEL), "migrate-storage"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    try:
        wait_until(
            lambda: copied_of_long_run() > 0 or first.poll() is not None,
            120,
            0.01,
            "the long run's copy to start",
        )
        first.send_signal(signal.SIGKILL)
    finally:
        output = first.communicate(timeout=60)
    assert first.returncode == -signal.SIGKILL, output
    assert 0 < copied_of_long_run() < len(expected[long_run]), "not killed inside the run"

    again = subprocess.run(
        [str(SENTINEL), "migrate-storage"], env=env, capture_output=True, text=True, timeout=300
    )
    assert again.returncode == 0, again.stderr
    with dg.DagsterInstance.from_config(str(dagster_home)) as postgres:
        assert type(postgres.event_log_storage).__name__ == "PostgresEventLogStorage"
        assert {run.run_id for run in postgres.get_runs()} == set(run_ids)
        for run_id in run_ids:
            assert _events(postgres, run_id) == expected[run_id], f"run {run_id}"
        assert _created(postgres) == created
        key = dg.AssetKey("tiny_partitioned")
        assert _materialised(postgres, key) == Counter(INTERRUPTED_PARTITIONS)
        assert postgres.get_materialized_partitions(key) == set(INTERRUPTED_PARTITIONS)
        limits = {pool.name: pool.limit for pool in postgres.event_log_storage.get_pool_limits()}
        assert limits.get(POOL[0]) == POOL[1]
