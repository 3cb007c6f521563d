"""A count pause limit the workers fill by design is refused at start-up, never changed.

What a worker holds at its most is its whole read at a concurrency of 1, and above that
its threads and a read-ahead of half as many (never past the larger of the two and a
read), never read count x concurrency: ``SENTINEL_LAG_PAUSE=200`` with 32 threads starts.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from sentinel_platform.cli.main import main
from sentinel_platform.settings import load_settings
from sentinel_platform.streams.backlog.zones import in_flight_problem
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform_tests.harness.processes import StartWorker

NAMED = ("SENTINEL_LAG_PAUSE", "SENTINEL_READ_COUNT", "SENTINEL_WORKER_CONCURRENCY")


@pytest.mark.parametrize(
    ("env", "workers", "refused"),
    [
        ({}, 8, False),  # limits in seconds of work: the allowance is measured, nothing to refuse
        ({"worker_concurrency": 1024}, 64, False),
        ({"lag_pause": 200}, 1, False),  # auto, capped at a read under count limits: 100
        ({"lag_pause": 200}, 2, True),  # auto: 200 in flight, the pause limit by design
        ({"lag_pause": 300, "worker_concurrency_max": 64}, 3, False),  # auto, 3 x (64 + 32)
        ({"lag_pause": 300, "worker_concurrency_max": 64}, 4, True),
        ({"lag_pause": 200, "worker_concurrency": 1}, 1, False),  # 100 in flight
        ({"lag_pause": 200, "worker_concurrency": 1}, 2, True),  # 200 in flight: by design
        ({"lag_pause": 200, "worker_concurrency": 4}, 1, False),  # 4 + 2 held, not 400
        ({"lag_pause": 200, "worker_concurrency": 32}, 1, False),  # the case: 48
        ({"lag_pause": 200, "worker_concurrency": 32}, 4, False),  # 192
        ({"lag_pause": 200, "worker_concurrency": 32}, 5, True),  # 240
        ({"lag_pause": 200, "worker_concurrency": 200}, 1, True),
        ({"lag_pause": 200, "read_count": 10, "worker_concurrency": 4}, 33, False),  # 198
        ({"lag_pause": 200, "read_count": 10, "worker_concurrency": 4}, 34, True),  # 204
        ({"lag_pause": 200, "read_count": 10, "worker_concurrency": 8}, 19, False),  # 8 + 2 each
        ({"lag_warn": 20, "worker_concurrency": 1}, 1, True),  # the derived pause: 80 < 100
    ],
)
def test_in_flight_problem(env: dict[str, int], workers: int, refused: bool) -> None:
    problem = in_flight_problem(load_settings(**env), workers)
    assert (problem is not None) is refused
    if problem:
        threads = env.get("worker_concurrency", 2) > 1  # auto, or a pinned number above 1
        named = [n for n in NAMED if not (threads and n == "SENTINEL_READ_COUNT")]
        assert all(name in problem for name in named), problem


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


def test_a_worker_with_32_threads_starts_under_a_pause_limit_of_200(
    start_worker: StartWorker, redis_client: RedisClient
) -> None:
    """It holds at most 48 messages (32 calls, 16 read ahead); the old formula asked for
    100 x 32 = 3,200."""
    env = {"SENTINEL_LAG_PAUSE": "200", "SENTINEL_WORKER_CONCURRENCY": "32"}
    worker = start_worker(env=env)
    worker.wait_ready(redis_client)
    assert worker.proc.poll() is None, worker.text()
    assert "must be above" not in worker.text()


def test_up_refuses_a_pause_limit_the_pool_fills_before_starting_anything(
    settings_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("SENTINEL_LAG_PAUSE", "200")
    monkeypatch.setenv("SENTINEL_WORKER_CONCURRENCY", "1")  # a worker holds its read, 100
    code = main(["up", "--transaction-workers", "2", "--no-dagster"])
    err = capsys.readouterr().err
    assert code == 1
    assert all(name in err for name in NAMED), err
    assert "2 worker(s) = 200" in err
    assert not (Path(settings_env["SENTINEL_HOME"]) / "run" / "up.json").exists()
