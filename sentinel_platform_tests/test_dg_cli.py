"""The project works with the ``dg`` CLI: ``[tool.dg]`` in pyproject.toml targets
``sentinel_platform.definitions`` (no ``defs/`` folder), so ``dg check defs`` and
``dg list defs`` load the same code location as ``dagster dev`` (see docs/dg.md).

Both commands run as ``dg`` would from a shell in the repository root, with the venv's
``dg`` executable, a throw-away DAGSTER_HOME and SENTINEL_HOME, and no Redis.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[1]
DG = Path(sys.executable).parent / "dg"


def _run_dg(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    dagster_home = tmp_path / "dagster_home"
    sentinel_home = tmp_path / "sentinel_home"
    dagster_home.mkdir()
    sentinel_home.mkdir()
    (dagster_home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {
        **os.environ,
        "GX_ANALYTICS_ENABLED": "false",
        "DAGSTER_DISABLE_TELEMETRY": "1",
        "DAGSTER_HOME": str(dagster_home),
        "SENTINEL_HOME": str(sentinel_home),
        # The venv counts as activated: dg compares $VIRTUAL_ENV with the project's .venv.
        "VIRTUAL_ENV": sys.prefix,
        "PYTHONUNBUFFERED": "1",
    }
    return subprocess.run(
        [str(DG), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
    )


def _output(done: subprocess.CompletedProcess[str]) -> str:
    return f"exit {done.returncode}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"


def test_dg_check_defs_passes(tmp_path: Path) -> None:
    assert DG.exists(), f"{DG} missing: install dagster-dg-cli (pyproject.toml dependencies)"
    done = _run_dg(tmp_path, "check", "defs")
    assert done.returncode == 0, _output(done)
    assert "All definitions loaded successfully" in done.stdout, _output(done)


def test_dg_list_defs_shows_the_streams_assets_and_the_publish_job(tmp_path: Path) -> None:
    done = _run_dg(tmp_path, "list", "defs", "--json")
    assert done.returncode == 0, _output(done)
    listed = json.loads(done.stdout)
    asset_keys = {asset["asset_key"] for asset in listed["assets"]}
    jobs = {job["name"] for job in listed["jobs"]}
    assert {"transaction_stream", "axiom_stream"} <= asset_keys, _output(done)
    assert "publish_transactions" in jobs, _output(done)
