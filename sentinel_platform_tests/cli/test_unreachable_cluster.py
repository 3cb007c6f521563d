"""``sentinel status`` and ``sentinel up`` name an unreachable Redis Cluster in one line.

Run as real ``sentinel`` processes (the installed console script) against a cluster URL
whose seed port is closed: exit status 1, a clear "cannot reach Redis" line with the
password redacted, and no traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from sentinel_platform.exit_codes import EXIT_ERROR
from sentinel_platform.redis_server import free_port

SECRET = "cluster-pw-41"
SENTINEL = Path(sys.executable).parent / "sentinel"


@pytest.mark.parametrize(
    "argv", [["status"], ["status", "--json"], ["up", "--no-dagster"]], ids=" ".join
)
def test_an_unreachable_cluster_is_one_redacted_line_and_exit_1(
    argv: list[str], tmp_path: Path
) -> None:
    env = {
        **os.environ,
        "REDIS_URL": f"redis+cluster://app:{SECRET}@127.0.0.1:{free_port()}/0",
        "SENTINEL_HOME": str(tmp_path / "home"),
        "PYTHONUNBUFFERED": "1",
    }
    result = subprocess.run(
        [str(SENTINEL), *argv], env=env, capture_output=True, text=True, timeout=120
    )
    shown = result.stdout + result.stderr
    assert result.returncode == EXIT_ERROR, shown
    assert "cannot reach Redis at redis+cluster://app:***@127.0.0.1:" in result.stderr, shown
    assert "Traceback" not in shown
    assert "RedisClusterException" not in shown
    assert SECRET not in shown
    logs = tmp_path / "home" / "logs"
    for log_file in logs.rglob("*") if logs.exists() else []:
        if log_file.is_file():
            assert SECRET not in log_file.read_text(errors="replace"), log_file
