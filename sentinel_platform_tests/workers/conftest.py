"""Worker-process fixtures, shared by the worker, benchmark, cluster and CLI tests.

``start_worker(...)`` launches a real ``python -m workers.watch_*`` process with the test
settings in its environment (plus short recovery timings, see :data:`FAST_TIMINGS`),
captures its JSON log lines, and is torn down (SIGKILL) at the end of the test.
``WorkerProcess.wait_ready()`` waits until its lease exists, i.e. it is in the group.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from sentinel_platform.settings import Settings, load_settings
from sentinel_platform.streams.connection import RedisClient
from sentinel_platform.streams.keys import StreamKeys, axiom_keys, transaction_keys
from sentinel_platform_tests.conftest import wait_until

#: The processor most worker tests use (counts calls; poison/slow/invalid switches).
TEST_PROCESSOR = "sentinel_platform_tests.workers.processors_for_tests:counting"
NOOP_PROCESSOR = "sentinel_platform_tests.workers.processors_for_tests:noop"
#: Short recovery timings so tests run in seconds (names are environment variables).
FAST_TIMINGS = {
    "SENTINEL_LEASE_TTL_MS": "1000",
    "SENTINEL_RECLAIM_IDLE_MS": "300",
    "SENTINEL_RETRY_BACKOFF_MS": "100",
    "SENTINEL_BLOCK_MS": "200",
    "SENTINEL_LAG_KEY_TTL_S": "2",
}
MODULES = {
    "transactions": "workers.watch_transactions",
    "axioms": "workers.watch_axioms",
}
_names = itertools.count(1)


@dataclass
class WorkerProcess:
    """A real worker process and where its log lines go."""

    proc: subprocess.Popen[bytes]
    consumer: str
    keys: StreamKeys
    log_path: Path
    env: Mapping[str, str] = field(repr=False)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def lease_alive(self, client: RedisClient) -> bool:
        return bool(client.exists(self.keys.lease(self.consumer)))

    def wait_ready(self, client: RedisClient, timeout_s: float = 15.0) -> WorkerProcess:
        """Wait until the worker holds its lease (it is then in the group and reading)."""

        def ready() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"worker exited with {self.proc.returncode}:\n{self.text()}")
            return self.lease_alive(client)

        wait_until(ready, timeout_s)
        return self

    def kill(self) -> None:
        """SIGKILL: no clean-up at all, as in a crash."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)

    def terminate(self) -> None:
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGTERM)

    def wait(self, timeout_s: float = 15.0) -> int:
        return self.proc.wait(timeout=timeout_s)

    def text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        """Parsed JSON log lines, optionally only those whose ``event`` is ``name``."""
        out = []
        for line in self.text().splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if name is None or entry.get("event") == name:
                out.append(entry)
        return out


StartWorker = Callable[..., WorkerProcess]


@pytest.fixture
def worker_env(settings_env: dict[str, str]) -> dict[str, str]:
    """Environment for worker processes: the test server plus :data:`FAST_TIMINGS`."""
    return {**settings_env, **FAST_TIMINGS}


@pytest.fixture
def start_worker(worker_env: dict[str, str], tmp_path: Path) -> Iterator[StartWorker]:
    """Factory: ``start_worker(stream="transactions", consumer=None, processor=TEST_PROCESSOR,
    env=None, args=())`` -> :class:`WorkerProcess`. ``processor=None`` keeps the entry
    point's default (the domain processor); ``env`` adds or overrides variables."""
    started: list[WorkerProcess] = []

    def start(
        stream: str = "transactions",
        consumer: str | None = None,
        processor: str | None = TEST_PROCESSOR,
        env: Mapping[str, str] | None = None,
        args: Sequence[str] = (),
    ) -> WorkerProcess:
        name = consumer or f"w{next(_names)}-{os.getpid()}"
        full_env = {**worker_env, **(env or {})}
        settings = _settings_from_env(full_env)
        keys = transaction_keys(settings) if stream == "transactions" else axiom_keys(settings)
        command = [sys.executable, "-m", MODULES[stream], "--consumer", name, *args]
        if processor:
            command += ["--processor", processor]
        log_path = tmp_path / f"{name}.log"
        with log_path.open("ab") as log_file:
            proc = subprocess.Popen(
                command, env=full_env, stdout=log_file, stderr=subprocess.STDOUT
            )
        worker = WorkerProcess(proc, name, keys, log_path, full_env)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.kill()


def _settings_from_env(env: Mapping[str, str]) -> Settings:
    values: dict[str, Any] = {}
    for name, value in env.items():
        if name == "REDIS_URL":
            values["redis_url"] = value
        elif name.startswith("SENTINEL_"):
            values[name.removeprefix("SENTINEL_").lower()] = value
    return load_settings(**values)


@pytest.fixture
def tx_keys(settings: Settings) -> StreamKeys:
    return transaction_keys(settings)


def publish(
    client: RedisClient, keys: StreamKeys, messages: Sequence[Mapping[str, str]]
) -> list[str]:
    """XADD every message in one pipeline; their ids."""
    pipe = client.pipeline(transaction=False)
    for fields in messages:
        pipe.xadd(keys.stream, dict(fields))
    return list(pipe.execute())


def pending_of(client: RedisClient, keys: StreamKeys, consumer: str) -> int:
    """How many messages ``consumer`` holds (0 when the group or consumer is gone)."""
    try:
        summary = client.xpending(keys.stream, keys.group)
    except Exception:
        return 0
    return sum(int(c["pending"]) for c in summary.get("consumers") or [] if c["name"] == consumer)
