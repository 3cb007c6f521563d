"""An existing home moves from SQLite to a real PostgreSQL without losing its sensor
cursors or its run history: ``sentinel up`` refuses the switch until ``sentinel
migrate-storage`` has copied them, and a second migration copies nothing twice."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sentinel_platform.cli.dagster_home import ensure_dagster_home, storage_kind
from sentinel_platform.cli.main import main
from sentinel_platform.redis_server import free_port
from sentinel_platform_tests.deploy.postgres import PASSWORD, PASSWORD_IN_URL

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

    from sentinel_platform_tests.deploy import tiny_location

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
