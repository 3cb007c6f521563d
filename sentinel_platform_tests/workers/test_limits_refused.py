"""A count pause limit the workers fill by design is refused at start-up, never changed."""

from __future__ import annotations

from pathlib import Path

import pytest

from sentinel_platform.cli.main import main
from sentinel_platform.settings import load_settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.pool.zones import in_flight_problem
from sentinel_platform_tests.workers.conftest import StartWorker

NAMED = ("SENTINEL_LAG_PAUSE", "SENTINEL_READ_COUNT", "SENTINEL_WORKER_CONCURRENCY")


@pytest.mark.parametrize(
    ("env", "workers", "refused"),
    [
        ({}, 8, False),  # limits in seconds of work: nothing to refuse
        ({"lag_pause": 200}, 1, False),  # 100 in flight
        ({"lag_pause": 200}, 2, True),  # 200 in flight: the pause limit is reached by design
        ({"lag_pause": 200, "worker_concurrency": 4}, 1, True),
        ({"lag_pause": 200, "read_count": 10, "worker_concurrency": 4}, 5, True),  # 200
        ({"lag_pause": 200, "read_count": 10, "worker_concurrency": 4}, 3, False),
        ({"lag_warn": 20}, 1, True),  # the pause limit derived from it: 80 < 100
    ],
)
def test_in_flight_problem(env: dict[str, int], workers: int, refused: bool) -> None:
    problem = in_flight_problem(load_settings(**env), workers)
    assert (problem is not None) is refused
    if problem:
        assert all(name in problem for name in NAMED), problem


def test_worker_refuses_a_pause_limit_its_own_reads_fill(start_worker: StartWorker) -> None:
    worker = start_worker(env={"SENTINEL_LAG_WARN": "10", "SENTINEL_LAG_PAUSE": "50"})
    assert worker.wait() == 2  # start-up refused
    log = worker.text()
    assert "SENTINEL_LAG_PAUSE (50)" in log and "SENTINEL_READ_COUNT (100)" in log
    assert "SENTINEL_WORKER_CONCURRENCY (1)" in log


def test_worker_starts_when_its_share_fits(
    start_worker: StartWorker, redis_client: RedisClient
) -> None:
    limits = {"SENTINEL_LAG_WARN": "10", "SENTINEL_LAG_PAUSE": "50"}
    start_worker(env=limits, args=("--count", "10")).wait_ready(redis_client)


def test_up_refuses_a_pause_limit_the_pool_fills_before_starting_anything(
    settings_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("SENTINEL_LAG_PAUSE", "200")
    code = main(["up", "--transaction-workers", "2", "--no-dagster"])
    err = capsys.readouterr().err
    assert code == 1
    assert all(name in err for name in NAMED), err
    assert "2 worker(s) = 200" in err
    assert not (Path(settings_env["SENTINEL_HOME"]) / "run" / "up.json").exists()
