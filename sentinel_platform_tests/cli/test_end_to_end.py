"""End to end through real processes: ``sentinel up`` (workers + ``dagster dev``), a publish
launched through the webserver's GraphQL API, every message processed exactly once, a
nominal ``sentinel status``, and nothing left running after SIGTERM.

The run is one partition of ``demo_publish`` (both publish assets, their upstream Spark
assets and checks, in one process and one Spark session) with a small config.

The lag gate (``consumer_lag_sensor``) launches the day's default-size partitions on its
first tick; here it is stopped beforehand (as an operator would in the UI) so the test
controls exactly what is published and stays within its time budget. The gate itself is
tested with the sensors.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sentinel_platform.cli import proctree
from sentinel_platform.cli.dagster_home import ensure_dagster_home
from sentinel_platform.domains.demo import schedule as demo
from sentinel_platform.schemas import Axiom, Transaction
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform_tests.harness.sentinel_up import (
    SENTINEL,
    dagster_log_tail,
    dagster_sensor,
    http_ok,
    seen_processes,
    start_sentinel_up,
)
from sentinel_platform_tests.harness.waits import wait_until

# The waits below allow 8 min for the run alone (a loaded 2-core CI machine): the suite's
# default timeout of 5 min would cut them short (263 s of call plus 33 s of set-up measured).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

PARTITION = "2026-03-01"
SEED = 4242
#: One run for both publish assets: one process and one Spark session, not two.
JOB = demo.JOB_NAME


def _seen_pids(home: Path) -> dict[int, float]:
    path = home / "run" / "up.json"
    return seen_processes(json.loads(path.read_text())) if path.exists() else {}


@pytest.fixture
def platform(
    settings: Settings, settings_env: dict[str, str], redis_client: RedisClient
) -> Iterator[tuple[int, dict[str, str]]]:
    """``sentinel up`` on a free port against the test Redis; SIGTERM at teardown."""
    env = {**settings_env, "DAGSTER_HOME": str(settings.dagster_home)}
    ensure_dagster_home(settings.dagster_home)
    dagster_sensor(env, "stop", "consumer_lag_sensor")
    port, up = start_sentinel_up(env)
    try:
        yield port, env
    finally:
        seen = _seen_pids(settings.home_dir)
        up.send_signal(signal.SIGTERM)
        output = up.communicate(timeout=120)[0].decode()
        seen |= _seen_pids(settings.home_dir)
        assert up.returncode == 0, output
        left = sorted(proctree.still_running(seen))
        assert not left, f"processes left behind: {left}\n{output}"


def _wait_runs(client: object, run_ids: list[str], timeout_s: float, home: Path) -> None:
    from dagster import DagsterRunStatus

    deadline = time.monotonic() + timeout_s
    pending = set(run_ids)
    while pending:
        for run_id in list(pending):
            status = client.get_run_status(run_id)  # type: ignore[attr-defined]
            if status == DagsterRunStatus.SUCCESS:
                pending.discard(run_id)
            elif status in (DagsterRunStatus.FAILURE, DagsterRunStatus.CANCELED):
                raise AssertionError(f"run {run_id} ended {status}:\n{dagster_log_tail(home, 60)}")
        if time.monotonic() > deadline:
            raise AssertionError(
                f"runs not finished in {timeout_s}s: {pending}\n{dagster_log_tail(home, 60)}"
            )
        time.sleep(1)


def test_publish_through_the_ui_server_is_processed_once_and_shutdown_is_clean(
    platform: tuple[int, dict[str, str]], settings: Settings, redis_client: RedisClient
) -> None:
    from dagster_graphql import DagsterGraphQLClient

    port, env = platform
    wait_until(lambda: http_ok(f"http://127.0.0.1:{port}/"), timeout_s=90, interval_s=0.5)
    graphql = DagsterGraphQLClient("127.0.0.1", port_number=port)
    run_id = graphql.submit_job_execution(
        JOB, run_config=demo.demo_run_config(SEED), tags={"dagster/partition": PARTITION}
    )
    # Alone the run takes under a minute; next to two other test processes on two cores
    # (CI), Spark's start and the reporting runs the automation sensor launches share them.
    _wait_runs(graphql, [run_id], timeout_s=480, home=settings.home_dir)

    published_tx = {
        Transaction.from_fields(f).id for _, f in redis_client.xrange(settings.transactions_stream)
    }
    published_ax = {
        Axiom.from_fields(f).natural_key for _, f in redis_client.xrange(settings.axioms_stream)
    }
    assert len(published_tx) == demo.TRANSACTIONS_PER_TICK
    assert published_ax, "the telemetry produced no axiom: the test would prove nothing"

    def results_complete() -> bool:
        return redis_client.xlen(settings.verdicts_stream) >= len(published_tx) and (
            redis_client.xlen(settings.compliance_stream) >= len(published_ax)
        )

    wait_until(results_complete, timeout_s=180, interval_s=0.5)
    verdicts = [f["txn_id"] for _, f in redis_client.xrange(settings.verdicts_stream)]
    events = [
        f"{f['source_id']}|{f['emitted_at']}"
        for _, f in redis_client.xrange(settings.compliance_stream)
    ]
    assert sorted(verdicts) == sorted(published_tx)  # one verdict per transaction
    assert sorted(events) == sorted(published_ax)  # one compliance event per axiom
    assert redis_client.xlen(settings.dlq_stream) == 0

    status = subprocess.run(
        [str(SENTINEL), "status", "--json"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert status.returncode == 0, status.stdout + status.stderr
    assert json.loads(status.stdout)["zone"] == "nominal"
