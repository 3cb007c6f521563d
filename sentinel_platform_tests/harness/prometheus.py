"""A real Prometheus for the tests: Debian's ``prometheus`` package (``promtool`` and the
server), started on a free port with its own data directory and configuration.

Where the binaries are missing the tests skip, except in CI (``CI`` or
``REQUIRE_CLUSTER_TESTS=1`` set), where a missing one fails them: CI installs the package
(``.ci/run``'s prerequisites), as it does PostgreSQL's.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import pytest

from sentinel_platform.redis_server import free_port
from sentinel_platform_tests.harness.waits import wait_until

#: Where Debian's package puts them; PATH is searched too.
DEBIAN_BINARIES = {"promtool": "/usr/bin/promtool", "prometheus": "/usr/bin/prometheus"}
START_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 20.0


def require(reason: str) -> NoReturn:
    """Skip, or fail in CI: CI installs Prometheus, so there a missing one is a failure."""
    if os.environ.get("CI") or os.environ.get("REQUIRE_CLUSTER_TESTS") == "1":
        pytest.fail(f"Prometheus required in CI but {reason}", pytrace=False)
    pytest.skip(f"PROMETHEUS TESTS NOT RUN: {reason}")


def binary(name: str) -> str:
    """The path of ``promtool`` or ``prometheus``, or skip/fail (:func:`require`)."""
    found = shutil.which(name) or (
        DEBIAN_BINARIES[name] if os.access(DEBIAN_BINARIES[name], os.X_OK) else None
    )
    if not found:
        require(f"{name} is not installed (Debian package `prometheus`)")
    return found


def promtool(*argv: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``promtool ARGV...``; its exit code and output (never raises on a failure)."""
    return subprocess.run(
        [binary("promtool"), *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )


@dataclass
class PrometheusServer:
    """One ``prometheus`` process; :meth:`start` waits until it answers ``/-/ready``."""

    root: Path
    config: str
    port: int = field(default_factory=free_port)
    process: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log_path(self) -> Path:
        return self.root / "prometheus.log"

    def start(self) -> PrometheusServer:
        self.root.mkdir(parents=True, exist_ok=True)
        config = self.root / "prometheus.yml"
        config.write_text(self.config)
        argv = [
            binary("prometheus"),
            f"--config.file={config}",
            f"--storage.tsdb.path={self.root / 'data'}",
            f"--web.listen-address=127.0.0.1:{self.port}",
            "--web.enable-lifecycle",
        ]
        with self.log_path.open("ab") as log:
            self.process = subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
            )
        wait_until(self._ready, timeout_s=START_TIMEOUT_S, interval_s=0.2, what=self._why())
        return self

    def _why(self) -> str:
        return f"prometheus ready on {self.url} (log {self.log_path})"

    def _ready(self) -> bool:
        if self.process is not None and self.process.poll() is not None:
            raise AssertionError(f"prometheus exited {self.process.returncode}:\n{self.log_tail()}")
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as response:
                return bool(response.status == 200)
        except (urllib.error.URLError, OSError):
            return False

    def api(self, path: str, **params: str) -> Any:
        """``GET /api/v1/<path>``'s ``data`` (an error status raises)."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=10) as response:
            body = json.loads(response.read())
        if body.get("status") != "success":
            raise AssertionError(f"prometheus /api/v1/{path}: {body}")
        return body["data"]

    def alerts(self, name: str) -> list[dict[str, Any]]:
        """The alerts named ``name`` now (each with ``labels`` and ``state``)."""
        return [a for a in self.api("alerts")["alerts"] if a["labels"].get("alertname") == name]

    def query(self, expr: str) -> list[dict[str, Any]]:
        return list(self.api("query", query=expr)["result"])

    def log_tail(self, lines: int = 30) -> str:
        with contextlib.suppress(OSError):
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        return "(no log)"

    def stop(self) -> None:
        process = self.process
        if process is None or process.poll() is not None:
            return
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(10)
