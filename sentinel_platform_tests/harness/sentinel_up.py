"""``sentinel up`` as a real process, for the end-to-end and the browser tests.

Both start the real entry point (the console script in this venv) on a free port, set the
lag sensor up beforehand through Dagster's own CLI, and wait on the webserver's HTTP
answer; the helpers here are those shared steps.
"""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from sentinel_platform.cli.up_children import repo_root
from sentinel_platform.redis_server import free_port

#: The ``sentinel`` console script of this venv.
SENTINEL = Path(sys.executable).parent / "sentinel"


def dagster_sensor(env: Mapping[str, str], *argv: str) -> None:
    """``dagster sensor <argv> -w workspace.yaml`` on the repository's workspace."""
    workspace = str(repo_root() / "workspace.yaml")
    subprocess.run(
        [sys.executable, "-m", "dagster", "sensor", *argv, "-w", workspace],
        env=dict(env),
        cwd=repo_root(),
        check=True,
        capture_output=True,
        timeout=120,
    )


def start_sentinel_up(env: Mapping[str, str]) -> tuple[int, subprocess.Popen[bytes]]:
    """``sentinel up --no-demo`` on a free port: its port and process (output piped)."""
    port = free_port()
    process = subprocess.Popen(
        [str(SENTINEL), "up", "--port", str(port), "--no-demo"],
        env=dict(env),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    return port, process


def http_ok(url: str) -> bool:
    """The URL answers 200 (the webserver is up); any connection error is a no."""
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def dagster_log_tail(home: Path, lines: int) -> str:
    """The last ``lines`` of ``sentinel up``'s Dagster log under ``home``, for failure messages."""
    log = home / "logs" / "dagster.log"
    text = log.read_text(errors="replace") if log.exists() else "(no dagster.log)"
    return "\n".join(text.splitlines()[-lines:])


def seen_processes(state: dict[str, Any]) -> dict[int, float]:
    """Every process the supervisor of ``sentinel up`` saw (its state file, ``up.json``):
    pid -> creation time, so a pid the system reused since is not taken for a leftover."""
    children = state.get("children", {}).values()
    return {int(pid): float(t) for child in children for pid, t in child["seen_pids"].items()}
