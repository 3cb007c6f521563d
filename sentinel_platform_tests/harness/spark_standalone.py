"""A real Spark standalone cluster (one Master, one Worker) on 127.0.0.1.

It is started from the pyspark installation itself with ``bin/spark-class`` and the
standalone daemons' own classes, as an operator would start a small cluster, so a test
run against it goes through the real scheduler, a separate executor JVM launched by the
Worker and Python workers forked by that executor. It is sized for a 2-core CI machine:
one Worker with one core and 1 GB for executors, daemons with 256 MB heaps. Every daemon
runs in its own process group so teardown also reaps the executor JVM and its Python
workers, including after a failed start.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sentinel_platform.redis_server import free_port
from sentinel_platform_tests.harness.orphans import die_with_parent
from sentinel_platform_tests.harness.spark_jvm import archive_path, jvm_options, pyspark_home

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"


class SparkClusterError(RuntimeError):
    """A daemon did not come up; the message names its log file."""


def spark_env(log_dir: Path) -> dict[str, str]:
    """Environment for daemons and drivers: this venv's Python on every executor; the
    Master and the Worker (whose launcher reads ``SPARK_DAEMON_JAVA_OPTS``, not
    ``SPARK_SUBMIT_OPTS``) with the suite's JVM options and class archive."""
    home = pyspark_home()
    return {
        **os.environ,
        "SPARK_HOME": str(home),
        "SPARK_LOCAL_IP": "127.0.0.1",
        "SPARK_LOCAL_HOSTNAME": "127.0.0.1",
        "SPARK_LOG_DIR": str(log_dir),
        "SPARK_DAEMON_MEMORY": "256m",
        "SPARK_DAEMON_JAVA_OPTS": " ".join(jvm_options(archive_path())),
        "PYSPARK_PYTHON": sys.executable,
        "PYSPARK_DRIVER_PYTHON": sys.executable,
    }


@dataclass
class _Daemon:
    name: str
    process: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM the process group (daemon, executors, Python workers), then SIGKILL it."""
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout_s)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(5)


@dataclass
class SparkStandaloneCluster:
    """One Master + one Worker; ``master_url`` is what ``SENTINEL_SPARK_MASTER`` takes."""

    work_dir: Path
    worker_cores: int = 1
    worker_memory: str = "1g"
    master_port: int = field(default_factory=free_port)
    master_ui_port: int = field(default_factory=free_port)
    worker_port: int = field(default_factory=free_port)
    worker_ui_port: int = field(default_factory=free_port)
    master: _Daemon | None = None
    worker: _Daemon | None = None

    @property
    def master_url(self) -> str:
        return f"spark://127.0.0.1:{self.master_port}"

    @property
    def worker_pid(self) -> int:
        """PID of the Worker JVM (spark-class execs java, so it is the process we started)."""
        assert self.worker is not None, "cluster not started"
        return self.worker.pid

    @property
    def env(self) -> dict[str, str]:
        return spark_env(self.work_dir / "logs")

    def start(self, timeout_s: float = 90.0) -> SparkStandaloneCluster:
        try:
            self.master = self._launch(
                "master",
                MASTER_CLASS,
                ["--host", "127.0.0.1", "--port", str(self.master_port)],
                ["--webui-port", str(self.master_ui_port)],
            )
            self._wait(lambda: self.status() is not None, timeout_s, self.master)
            self.worker = self._launch(
                "worker",
                WORKER_CLASS,
                [self.master_url, "--host", "127.0.0.1", "--port", str(self.worker_port)],
                [
                    "--webui-port",
                    str(self.worker_ui_port),
                    "--cores",
                    str(self.worker_cores),
                    "--memory",
                    self.worker_memory,
                    "--work-dir",
                    str(self.work_dir / "work"),
                ],
            )
            self._wait(lambda: self.alive_workers() == 1, timeout_s, self.worker)
        except BaseException:
            self.stop()
            raise
        return self

    def _launch(self, name: str, cls: str, args: list[str], more: list[str]) -> _Daemon:
        logs = self.work_dir / "logs"
        logs.mkdir(parents=True, exist_ok=True)
        log_path = logs / f"{name}.log"
        spark_class = str(pyspark_home() / "bin" / "spark-class")
        with log_path.open("wb") as log:
            process = subprocess.Popen(
                [spark_class, cls, *args, *more],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.work_dir,
                start_new_session=True,
                preexec_fn=die_with_parent,
            )
        return _Daemon(name, process, log_path)

    def _wait(self, condition: Any, timeout_s: float, daemon: _Daemon) -> None:
        deadline = time.monotonic() + timeout_s
        while not condition():
            if daemon.process.poll() is not None:
                raise SparkClusterError(
                    f"spark {daemon.name} exited with {daemon.process.returncode}: "
                    f"{_tail(daemon.log_path)}"
                )
            if time.monotonic() > deadline:
                raise SparkClusterError(
                    f"spark {daemon.name} not ready in {timeout_s}s: {_tail(daemon.log_path)}"
                )
            time.sleep(0.2)

    def status(self) -> dict[str, Any] | None:
        """The Master's JSON status page, or None while it is not serving yet."""
        url = f"http://127.0.0.1:{self.master_ui_port}/json/"
        try:
            with urllib.request.urlopen(url, timeout=2) as response:
                return json.loads(response.read())
        except (urllib.error.URLError, OSError, ValueError):
            return None

    def application_ids(self) -> set[str]:
        """Ids of every application the Master ran or runs (its own bookkeeping)."""
        status = self.status() or {}
        apps = [*status.get("activeapps", []), *status.get("completedapps", [])]
        return {str(app["id"]) for app in apps if "id" in app}

    def alive_workers(self) -> int:
        status = self.status() or {}
        return sum(1 for worker in status.get("workers", []) if worker.get("state") == "ALIVE")

    def stop(self) -> None:
        for daemon in (self.worker, self.master):
            if daemon is not None:
                daemon.stop()

    def logs(self) -> str:
        """Tails of the daemon logs, to attach to a failing assertion."""
        parts = [f"--- {d.name}: {_tail(d.log_path)}" for d in (self.master, self.worker) if d]
        return "\n".join(parts)


def _tail(path: Path, limit: int = 3000) -> str:
    try:
        return path.read_text(errors="replace")[-limit:]
    except OSError as exc:
        return f"(no log: {exc})"


def ancestors(pid: int) -> list[int]:
    """The PPid chain of ``pid`` from /proc, nearest parent first."""
    chain = []
    current = pid
    while current > 1:
        try:
            status = Path(f"/proc/{current}/status").read_text()
        except OSError:
            break
        parent = int(next(line.split()[1] for line in status.splitlines() if line[:5] == "PPid:"))
        if parent <= 0:
            break
        chain.append(parent)
        current = parent
    return chain


def command_line(pid: int) -> str:
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()
