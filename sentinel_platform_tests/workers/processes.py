"""Real worker processes for tests and benchmarks: launch, wait for the lease, kill, read logs.

Plain functions and classes (no pytest) so benchmarks and other test areas can use them;
the fixtures in ``conftest.py`` wrap them.
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sentinel_platform.settings import Settings, load_settings
from sentinel_platform.streams.connection import RedisClient
from sentinel_platform.streams.keys import StreamKeys, axiom_keys, transaction_keys

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


def wait_until(condition: Callable[[], Any], timeout_s: float = 10.0) -> Any:
    """Poll ``condition`` until truthy (a copy of the test helper, without importing the
    test conftest, which scrubs the environment on import)."""
    deadline = time.monotonic() + timeout_s
    while not (result := condition()):
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout_s}s: {condition}")
        time.sleep(0.02)
    return result


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
        """Wait until the worker holds its lease and has logged ``started`` (in the group,
        lease taken, heartbeat running: what follows is its read loop). The lease alone
        is taken half way through start-up, so a test that froze or starved the server
        right then would meet start-up's retries instead of the loop it means to test."""

        def ready() -> bool:
            if self.proc.poll() is not None:
                raise AssertionError(f"worker exited with {self.proc.returncode}:\n{self.text()}")
            return self.lease_alive(client) and bool(self.events("started"))

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


def launch_worker(
    env: Mapping[str, str],
    log_dir: Path,
    stream: str = "transactions",
    consumer: str | None = None,
    processor: str | None = TEST_PROCESSOR,
    args: Sequence[str] = (),
) -> WorkerProcess:
    """Start ``python -m workers.watch_<stream>`` with ``env``; its log goes to ``log_dir``.

    ``processor=None`` keeps the entry point's default (the domain processor).
    """
    name = consumer or f"w{next(_names)}-{os.getpid()}"
    settings = settings_from_env(env)
    keys = transaction_keys(settings) if stream == "transactions" else axiom_keys(settings)
    command = [sys.executable, "-m", MODULES[stream], "--consumer", name, *args]
    if processor:
        command += ["--processor", processor]
    log_path = log_dir / f"{name}.log"
    with log_path.open("ab") as log_file:
        proc = subprocess.Popen(command, env=dict(env), stdout=log_file, stderr=subprocess.STDOUT)
    return WorkerProcess(proc, name, keys, log_path, env)


def settings_from_env(env: Mapping[str, str]) -> Settings:
    """The settings a worker started with ``env`` sees (for its key names)."""
    values: dict[str, Any] = {}
    for name, value in env.items():
        if name == "REDIS_URL":
            values["redis_url"] = value
        elif name.startswith("SENTINEL_"):
            values[name.removeprefix("SENTINEL_").lower()] = value
    return load_settings(**values)


def publish(
    client: RedisClient, keys: StreamKeys, messages: Sequence[Mapping[str, str]]
) -> list[str]:
    """XADD every message in one pipeline; their ids."""
    pipe = client.pipeline(transaction=False)
    for fields in messages:
        pipe.xadd(keys.stream, dict(fields))
    return list(pipe.execute())


def read_and_ack(
    client: RedisClient, keys: StreamKeys, count: int, consumer: str = "c"
) -> list[str]:
    """Read up to ``count`` new entries as ``consumer`` of the group and acknowledge them.

    Stands in for a worker that has finished those entries; returns their ids, oldest first.
    """
    read = client.xreadgroup(keys.group, consumer, {keys.stream: ">"}, count=count)
    ids = [message_id for message_id, _fields in read[0][1]]
    client.xack(keys.stream, keys.group, *ids)
    return ids


def pending_of(client: RedisClient, keys: StreamKeys, consumer: str) -> int:
    """How many messages ``consumer`` holds (0 when the group or consumer is gone)."""
    try:
        summary = client.xpending(keys.stream, keys.group)
    except Exception:
        return 0
    return sum(int(c["pending"]) for c in summary.get("consumers") or [] if c["name"] == consumer)
