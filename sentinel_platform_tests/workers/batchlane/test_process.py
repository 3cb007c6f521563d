"""The worker's side of the lane's process (:mod:`workers.batchlane.process`): the
child's command line and environment, its exit status, and a child that ignores
SIGTERM killed at the deadline."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys

import pytest

from sentinel_platform.exit_codes import EXIT_ERROR, EXIT_OK, EXIT_USAGE
from sentinel_platform.logs import BoundLogger
from workers.batchlane.process import LANE_SUFFIX, child_env, ended, exit_status, lane_command
from workers.startup import WorkerOptions


def test_the_command_carries_the_workers_stream_processor_and_overrides() -> None:
    options = WorkerOptions(
        consumer="w-1", processor="m:f", count=7, block_ms=200, log_level="DEBUG"
    )
    command = lane_command("transactions", options, 4242)
    assert command[:4] == [sys.executable, "-m", "workers.batchlane", "transactions"]
    flags = dict(zip(command[4::2], command[5::2], strict=True))
    assert flags == {
        "--consumer": "w-1" + LANE_SUFFIX,
        "--processor": "m:f",
        "--parent-pid": "4242",
        "--log-level": "DEBUG",
        "--count": "7",
        "--block-ms": "200",
    }


@pytest.mark.parametrize(
    ("path", "expected"),
    [(None, "/code"), ("", "/code"), ("/other", "/code:/other")],
)
def test_the_childs_path_starts_with_the_workers_code(path: str | None, expected: str) -> None:
    environ = {"HOME": "/h"} if path is None else {"HOME": "/h", "PYTHONPATH": path}
    assert child_env(environ, "/code") == {"HOME": "/h", "PYTHONPATH": expected}


@pytest.mark.parametrize(
    ("returncode", "signalled", "status"),
    [
        (0, False, EXIT_OK),
        (0, True, EXIT_OK),
        (EXIT_USAGE, False, EXIT_USAGE),
        (EXIT_ERROR, True, EXIT_ERROR),
        (-signal.SIGKILL, True, EXIT_OK),  # killed by its worker at the deadline
        (-signal.SIGTERM, True, EXIT_OK),  # stopped during its start-up
        (-signal.SIGKILL, False, EXIT_ERROR),  # someone else's signal
    ],
)
def test_exit_status(returncode: int, signalled: bool, status: int) -> None:
    assert exit_status(returncode, signalled) == status


def test_a_child_ignoring_sigterm_is_killed_at_the_deadline() -> None:
    code = (
        "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
        "print('ready', flush=True); time.sleep(60)"
    )
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    try:
        assert child.stdout is not None and child.stdout.readline() == b"ready\n"
        assert ended(child, 0.3, BoundLogger(logging.getLogger(__name__), {})) is True
        assert child.returncode == -signal.SIGKILL
    finally:
        child.kill()
        child.wait(5)


def test_a_child_that_exited_by_itself_is_not_signalled() -> None:
    child = subprocess.Popen([sys.executable, "-c", "raise SystemExit(2)"])
    child.wait(10)
    assert ended(child, 0.3, BoundLogger(logging.getLogger(__name__), {})) is False
    assert child.returncode == EXIT_USAGE
