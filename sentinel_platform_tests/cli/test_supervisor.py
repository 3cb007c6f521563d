"""The supervisor of ``sentinel up`` with real child processes: restart with backoff,
no restart for a misconfigured child, and stop that leaves no grandchild behind."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from sentinel_platform.cli import proctree
from sentinel_platform.cli.supervisor import Backoff, ChildSpec, Supervisor
from sentinel_platform_tests.harness.waits import wait_until


def _spec(tmp_path: Path, name: str, code: str, **kw: object) -> ChildSpec:
    argv = [sys.executable, "-c", code]
    return ChildSpec(name, argv, {"PATH": "/usr/bin:/bin"}, tmp_path / f"{name}.log", **kw)


def test_backoff_doubles_per_quick_crash_and_resets_after_a_stable_run() -> None:
    backoff = Backoff(initial_s=1, max_s=5, stable_s=30)
    assert [backoff.next_delay(ran_s=0.1) for _ in range(5)] == [1, 2, 4, 5, 5]
    assert backoff.next_delay(ran_s=60) == 1


def test_a_crashing_child_is_restarted_after_its_backoff(tmp_path: Path) -> None:
    supervisor = Supervisor(tmp_path / "state.json", Backoff(initial_s=0.2, max_s=1))
    child = supervisor.add(_spec(tmp_path, "crashy", "raise SystemExit(1)"))
    first = child.process.pid if child.process else None
    wait_until(lambda: not supervisor.poll() and child.restarts >= 2, timeout_s=10)
    assert child.process is not None and child.process.pid != first
    state = json.loads((tmp_path / "state.json").read_text())
    assert state["children"]["crashy"]["restarts"] >= 2
    supervisor.stop(["crashy"], timeout_s=5)


def test_a_child_exiting_with_the_usage_code_is_not_restarted(tmp_path: Path) -> None:
    supervisor = Supervisor(tmp_path / "state.json", Backoff(initial_s=0.1))
    child = supervisor.add(_spec(tmp_path, "misconfigured", "raise SystemExit(2)"))
    finished = wait_until(supervisor.poll, timeout_s=10)
    assert finished == [child]
    time.sleep(0.3)
    assert supervisor.poll() == [child] and child.restarts == 0


def test_stop_terminates_the_child_and_its_orphaned_grandchildren(tmp_path: Path) -> None:
    # The child starts a grandchild in a new session (out of its process group), as a
    # code server or run worker may, then ignores SIGTERM.
    code = (
        "import signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(60)'],"
        " start_new_session=True)\n"
        "time.sleep(60)\n"
    )
    supervisor = Supervisor(tmp_path / "state.json")
    child = supervisor.add(_spec(tmp_path, "stubborn", code))
    assert child.process is not None
    pid = child.process.pid
    wait_until(lambda: proctree.descendants(pid), timeout_s=10)
    supervisor.poll()  # records the grandchild
    seen = set(child.seen_pids)
    assert len(seen) == 2
    supervisor.stop(["stubborn"], timeout_s=1, group=True)
    assert not [p for p in seen if proctree.alive(p)]


def test_the_state_names_each_process_seen_with_its_creation_time(tmp_path: Path) -> None:
    # A long test or an operator reads ``up.json`` minutes later, when the system may have
    # given a dead child's pid to another process: the creation time tells them apart.
    supervisor = Supervisor(tmp_path / "state.json")
    child = supervisor.add(_spec(tmp_path, "sleeper", "import time; time.sleep(60)"))
    assert child.process is not None
    seen = json.loads((tmp_path / "state.json").read_text())["children"]["sleeper"]["seen_pids"]
    assert seen == {str(child.process.pid): proctree.start_time(child.process.pid)}
    supervisor.stop(["sleeper"], timeout_s=5)
    assert not proctree.still_running({int(pid): t for pid, t in seen.items()})
