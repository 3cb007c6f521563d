"""Bench hygiene: a stopped bench leaves no processes behind, a bench without the
``bench`` extra (matplotlib) still prints its figures.

Both run real bench processes: the shared harness (:mod:`bench._common`) with its
embedded ``redis-server`` and a child it owns, stopped by SIGTERM as a CI timeout or
``kill`` would; and ``bench/backpressure.py`` in its shortest form with ``matplotlib``
unimportable.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from sentinel_platform_tests.harness.waits import wait_until

REPO_ROOT = Path(__file__).resolve().parents[2]

#: A bench reduced to its harness: the parser (which installs the signal handling), the
#: embedded server and one child process in a Fleet; it reports both pids and then waits.
HARNESS = """
import sys, threading
from pathlib import Path
sys.path.insert(0, sys.argv[1])
from bench._common import base_parser, redis_server
from sentinel_platform_tests.harness.processes import Fleet
base_parser("hygiene").parse_args([])
idle = [sys.executable, "-c", "import threading; threading.Event().wait()"]
with redis_server() as server, Fleet(Path(sys.argv[2])) as fleet:
    child = fleet.spawn("idle", idle, {})
    print(server.pid, child.pid, flush=True)
    threading.Event().wait()
"""


def _env() -> dict[str, str]:
    """This environment without a REDIS_URL: the bench starts its own server."""
    return {k: v for k, v in os.environ.items() if k != "REDIS_URL"}


@pytest.fixture
def reaped() -> Iterator[list[psutil.Process]]:
    """Processes a test must not leave behind, SIGKILLed at the end if still running."""
    processes: list[psutil.Process] = []
    yield processes
    for process in processes:
        if process.is_running():
            process.kill()


def _gone(process: psutil.Process) -> bool:
    return not process.is_running() or process.status() == psutil.STATUS_ZOMBIE


def test_a_bench_stopped_by_sigterm_stops_its_redis_server_and_children(
    tmp_path: Path, reaped: list[psutil.Process]
) -> None:
    out = tmp_path / "out.txt"
    with out.open("wb") as log:
        bench = subprocess.Popen(
            [sys.executable, "-c", HARNESS, str(REPO_ROOT), str(tmp_path)],
            cwd=REPO_ROOT,
            env=_env(),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    reaped.append(psutil.Process(bench.pid))
    pids = wait_until(lambda: out.read_text().split(), 30)
    server, child = (psutil.Process(int(pid)) for pid in pids[:2])
    reaped += [server, child]
    assert server.name().startswith(("redis-server", "valkey-server"))

    bench.send_signal(signal.SIGTERM)

    code = bench.wait(30)
    wait_until(lambda: _gone(server) and _gone(child), 15)  # stopped, not orphaned
    assert code == 128 + signal.SIGTERM, out.read_text()  # the bench's exit, not a kill


def test_a_bench_without_matplotlib_prints_its_json_line_and_skips_the_chart(
    tmp_path: Path,
) -> None:
    png = tmp_path / "bp.png"
    argv = [
        "bench/backpressure.py",
        *("--quick", "--runs", "ours", "--seconds", "1", "--workers", "1", "--png", str(png)),
    ]
    blocked = (  # ``import matplotlib`` raises ImportError, as without the bench extra
        "import runpy, sys; sys.modules['matplotlib'] = None; "
        f"sys.argv = {argv!r}; runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    done = subprocess.run(
        [sys.executable, "-c", blocked],
        cwd=REPO_ROOT,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0, done.stdout + done.stderr
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    figures = json.loads(lines[-1])
    assert figures["bench"] == "backpressure" and "ours" in figures["runs"]
    assert figures["png"] is None and not png.exists()
    assert "chart skipped: matplotlib not installed" in done.stdout
