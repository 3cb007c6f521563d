"""Bench hygiene: a stopped bench leaves no processes behind, a bench without the
``bench`` extra (matplotlib) still prints its figures, and ``bench`` stays a small package.

The first two run real bench processes: the shared helpers (:mod:`bench.timing`) with
their embedded ``redis-server`` and a child they own, stopped by SIGTERM as a CI timeout
or ``kill`` would; and ``python -m bench backpressure`` in its shortest form with
``matplotlib`` unimportable. The others read the package: no scenario edits ``sys.path``
(``python -m bench`` runs from the repository root), none imports another module's
private names, no run output is tracked under ``bench/out``, and the package stays at
most :data:`MAX_SHARE` of the product's lines (a bench that grows past it has code to
share or a scenario to retire; git keeps the history, RESULTS.md the figures).
"""

from __future__ import annotations

import ast
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
BENCH = REPO_ROOT / "bench"
#: The most lines the bench package may have, as a share of the product's (the
#: ``sentinel_platform`` and ``workers`` packages). 12.5%: the analyzer's scenarios
#: (limits, token budget, quota, a real model) grew with the analyzer; the next to grow
#: shares code first (``analyzer_limits`` is the largest module).
MAX_SHARE = 0.125

#: A bench reduced to its harness: the parser (which installs the signal handling), the
#: embedded server and one child process in a Fleet; it reports both pids and then waits.
HARNESS = """
import sys, threading
from pathlib import Path
from bench.timing import base_parser, redis_server
from sentinel_platform_tests.harness.processes import Fleet
base_parser("hygiene", None).parse_args([])
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

    # (the clean-up waits up to 10 s for the child and 10 s for the server: room for both)
    code = bench.wait(60)
    wait_until(lambda: _gone(server) and _gone(child), 15)  # stopped, not orphaned
    assert code == 128 + signal.SIGTERM, out.read_text()  # the bench's exit, not a kill


def test_a_bench_without_matplotlib_prints_its_json_line_and_skips_the_chart(
    tmp_path: Path,
) -> None:
    png = tmp_path / "bp.png"
    argv = [
        *("bench", "backpressure", "--quick", "--runs", "ours", "--seconds", "1"),
        *("--workers", "1", "--png", str(png)),
    ]
    blocked = (  # ``import matplotlib`` raises ImportError, as without the bench extra
        "import runpy, sys; sys.modules['matplotlib'] = None; "
        f"sys.argv = {argv!r}; runpy.run_module('bench', run_name='__main__')"
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


def _lines(paths: list[Path]) -> int:
    return sum(len(path.read_text().splitlines()) for path in paths)


def _bench_modules() -> list[Path]:
    return sorted(BENCH.glob("*.py"))


def test_the_bench_package_stays_small_against_the_product() -> None:
    product = [
        path
        for package in ("sentinel_platform", "workers")
        for path in (REPO_ROOT / package).rglob("*.py")
    ]
    bench, limit = _lines(_bench_modules()), MAX_SHARE * _lines(product)
    assert bench <= limit, f"bench has {bench} lines, more than {MAX_SHARE:.0%}: {limit:.0f}"


def _offences(path: Path) -> list[str]:
    """Where ``path`` touches ``sys.path`` or imports a private name (a part with ``_``)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        where = f"{path.name}:{getattr(node, 'lineno', 0)}"
        value = getattr(node, "value", None)
        of_sys = isinstance(value, ast.Name) and value.id == "sys"
        if isinstance(node, ast.Attribute) and node.attr == "path" and of_sys:
            found.append(f"{where}: sys.path")
        names: list[str] = []
        if isinstance(node, ast.ImportFrom) and node.module != "__future__":
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        elif isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        found += [f"{where}: imports {name}" for name in names if "._" in f".{name}"]
    return found


def test_no_bench_module_edits_sys_path_or_imports_private_names() -> None:
    offences = [offence for path in _bench_modules() for offence in _offences(path)]
    assert not offences, "\n".join(offences)


def test_the_check_finds_a_path_edit_and_a_private_import(tmp_path: Path) -> None:
    module = tmp_path / "scenario.py"
    module.write_text("import sys\nsys.path.insert(0, '.')\nfrom bench.cells import _spawn\n")
    found = sorted(offence.split(": ")[1] for offence in _offences(module))
    assert found == ["imports bench.cells._spawn", "sys.path"]


def test_no_file_under_bench_out_is_tracked() -> None:
    tracked = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "ls-files", "bench/out"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    assert tracked == [], f"run outputs are tracked: {tracked}"
