"""Process bookkeeping of ``sentinel up`` on real processes, through psutil rather than a
Linux-only walk of /proc, so the supervisor finds and reaps its tree on macOS too."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from sentinel_platform.cli import proctree
from sentinel_platform_tests.harness.waits import wait_until

PARENT_WITH_GRANDCHILD = (
    "import subprocess, sys, time\n"
    "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],"
    " start_new_session=True)\n"
    "time.sleep(60)\n"
)
POLITE = "import time\nprint('ready', flush=True)\ntime.sleep(60)\n"
IGNORES_SIGTERM = (
    "import signal, time\n"
    "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
    "print('ready', flush=True)\n"
    "time.sleep(60)\n"
)


@pytest.fixture
def spawn() -> Iterator[list[subprocess.Popen[bytes]]]:
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(10)


def _python(spawned: list[subprocess.Popen[bytes]], code: str) -> subprocess.Popen[bytes]:
    process = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE)
    spawned.append(process)
    return process


def test_descendants_are_found_without_reading_proc(
    spawn: list[subprocess.Popen[bytes]], monkeypatch: pytest.MonkeyPatch
) -> None:
    # As on macOS: no /proc to walk. The tree must come from the OS's process table.
    monkeypatch.setattr(proctree, "PROC", Path("/nonexistent-proc"), raising=False)
    parent = _python(spawn, PARENT_WITH_GRANDCHILD)
    found = wait_until(lambda: proctree.descendants(parent.pid), timeout_s=15)
    assert len(found) == 1
    assert found == set(proctree.descendants(parent.pid, proctree.process_tree()))
    (grandchild,) = found
    assert proctree.alive(grandchild)
    proctree.reap(proctree.identify(found), grace_s=5)
    assert not proctree.alive(grandchild)


def test_a_reused_pid_is_not_the_process_seen_before(spawn: list[subprocess.Popen[bytes]]) -> None:
    process = _python(spawn, "import time; time.sleep(60)")
    seen = proctree.identify({process.pid})
    assert proctree.still_running(seen) == {process.pid}
    other_start = {process.pid: seen[process.pid] - 1000.0}  # same number, older process
    assert proctree.still_running(other_start) == set()


def test_reap_terminates_then_kills_what_ignores_sigterm(
    spawn: list[subprocess.Popen[bytes]],
) -> None:
    polite = _python(spawn, POLITE)
    stubborn = _python(spawn, IGNORES_SIGTERM)
    for process in (polite, stubborn):  # both running, the stubborn one's handler in place
        assert process.stdout is not None
        assert process.stdout.readline() == b"ready\n"
    seen = proctree.identify({polite.pid, stubborn.pid})
    killed = proctree.reap(seen, grace_s=3.0)
    # The polite one obeyed SIGTERM; under load it may still be exiting when the grace
    # ends, and it is counted by how it ended, not by whether it was still in the table.
    assert killed == [stubborn.pid]
    assert wait_until(lambda: not proctree.still_running(seen), timeout_s=30)


@pytest.mark.parametrize(
    ("returncode", "killed"),
    [
        (-signal.SIGKILL, True),  # our child, ended by the SIGKILL
        (None, True),  # not our child, or still there: it outlived the grace
        (-signal.SIGTERM, False),  # obeyed SIGTERM, only slow to finish exiting
        (0, False),  # its own SIGTERM handler exited cleanly just after the grace
        (1, False),
    ],
)
def test_only_what_sigkill_ended_counts_as_killed(returncode: int | None, killed: bool) -> None:
    assert proctree.ended_by_sigkill(returncode) is killed


def test_a_zombie_is_not_alive_and_not_reaped_as_a_survivor(
    spawn: list[subprocess.Popen[bytes]],
) -> None:
    exited = _python(spawn, "pass")  # exits at once; nobody waits for it: a zombie
    seen = proctree.identify({exited.pid})
    assert wait_until(lambda: _status(exited.pid) == psutil.STATUS_ZOMBIE, timeout_s=30)
    assert not proctree.alive(exited.pid)
    assert proctree.still_running(seen) == set()
    assert proctree.reap(seen, grace_s=1.0) == []


def _status(pid: int) -> str | None:
    try:
        return str(psutil.Process(pid).status())
    except psutil.Error:
        return None
