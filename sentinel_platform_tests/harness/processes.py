"""Real worker processes for tests and benchmarks: start, wait until ready, stop, read logs.

A worker is ``python -m sentinel_platform.workers <stream> --consumer <name> ...``: the
stream's name comes from the registry (:func:`~sentinel_platform.registry.spec_for`),
never from a map of modules. Each child writes its output to a log file (a pipe would
fill and block it); its JSON log lines are read back with :meth:`Child.events`. A
:class:`Fleet` owns the children of a test or a bench and SIGKILLs whatever still runs
when it closes. A worker is *ready* once it has logged ``started`` and holds its lease:
in the group, lease taken, heartbeat running, so what follows is its read loop (the lease
alone is taken half way through start-up).
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import signal
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

from sentinel_platform.registry import spec_for
from sentinel_platform.settings import Settings, load_settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, keys_for
from sentinel_platform_tests.harness.strays import kill_with_strays
from sentinel_platform_tests.harness.waits import wait_until

REPO_ROOT = Path(__file__).resolve().parents[2]
PYTHON = sys.executable
_PROCESSORS = "sentinel_platform_tests.harness.processors"
#: The processor most worker tests and the drills use (counts calls; behaviour switches).
TEST_PROCESSOR = f"{_PROCESSORS}:counting"
#: No Redis call, no work: the consumer machinery alone.
NOOP_PROCESSOR = f"{_PROCESSORS}:noop"
NOOP_TRANSACTIONS_PROCESSOR = f"{_PROCESSORS}:noop_transactions"
#: Short recovery timings so tests run in seconds (names are environment variables).
FAST_TIMINGS = {
    # The suites that use these timings pin one call at a time, so what a worker holds is
    # known to each test (a test of many in flight passes --concurrency, one of the
    # default, ``auto``, leaves it out: test_concurrency.py).
    "SENTINEL_WORKER_CONCURRENCY": "1",
    "SENTINEL_LEASE_TTL_MS": "1000",
    "SENTINEL_RECLAIM_IDLE_MS": "300",
    "SENTINEL_RETRY_BACKOFF_MS": "100",
    "SENTINEL_BLOCK_MS": "200",
    "SENTINEL_LAG_KEY_TTL_S": "2",
}
_names = itertools.count(1)
C = TypeVar("C", bound="Child")


class WorkerExited(AssertionError, RuntimeError):
    """A worker a test or a bench waits for has exited (a failed test, a failed part)."""


# --- environment and command ----------------------------------------------------------


def child_env(url: str, home: Path, **settings: Any) -> dict[str, str]:
    """Environment of a child process: this environment without its ``SENTINEL_*`` and
    ``REDIS_URL``, the repo importable, and ``settings`` (field names) as ``SENTINEL_*``."""
    env = {
        name: value
        for name, value in os.environ.items()
        if not (name.startswith("SENTINEL_") or name == "REDIS_URL")
    }
    env.update(
        {
            "REDIS_URL": url,
            "SENTINEL_HOME": str(home),
            "PYTHONUNBUFFERED": "1",
            "PYTHONPATH": os.pathsep.join(
                filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH", "")])
            ),
            "GX_ANALYTICS_ENABLED": "false",
        }
    )
    for name, value in settings.items():
        env[f"SENTINEL_{name.upper()}"] = str(value)
    return env


def settings_from_env(env: Mapping[str, str]) -> Settings:
    """The settings a worker started with ``env`` sees (for its key names)."""
    values: dict[str, Any] = {}
    for name, value in env.items():
        if name == "REDIS_URL":
            values["redis_url"] = value
        elif name.startswith("SENTINEL_"):
            values[name.removeprefix("SENTINEL_").lower()] = value
    return load_settings(**values)


def worker_command(
    stream: str, consumer: str, processor: str | None = None, args: Sequence[str] = ()
) -> list[str]:
    """The command line of one worker of the registry's stream ``stream``.

    ``processor=None`` keeps the stream's own processor (the domain processor).
    """
    command = [PYTHON, "-m", "sentinel_platform.workers", spec_for(stream).name]
    command += ["--consumer", consumer, *args]
    if processor:
        command += ["--processor", processor]
    return command


# --- one child process ------------------------------------------------------------------


@dataclass
class Child:
    """One child process with its output in a log file."""

    name: str
    proc: subprocess.Popen[bytes]
    log_path: Path

    @property
    def pid(self) -> int:
        return self.proc.pid

    @property
    def process(self) -> subprocess.Popen[bytes]:
        """The ``Popen`` (:attr:`proc`), by the name the drills use."""
        return self.proc

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL, as a crash would: no clean-up at all."""
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)

    def terminate(self) -> None:
        """SIGTERM, without waiting."""
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)

    def wait(self, timeout_s: float = 15.0) -> int:
        return self.proc.wait(timeout=timeout_s)

    def stop(self, timeout_s: float = 15.0) -> int | None:
        """SIGTERM and wait; SIGKILL if it does not exit in time. Returns the exit code."""
        self.terminate()
        try:
            self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
        return self.proc.returncode

    def text(self) -> str:
        """Everything the process has written so far."""
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def tail(self, lines: int = 20) -> str:
        return "\n".join(self.text().splitlines()[-lines:])

    # The drills' names of the two readers above.
    log_text = text
    log_tail = tail

    def events(self, name: str | None = None) -> list[dict[str, Any]]:
        """Parsed JSON log lines, optionally only those whose ``event`` is ``name``."""
        out = []
        for line in self.text().splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue
            if isinstance(entry, dict) and (name is None or entry.get("event") == name):
                out.append(entry)
        return out


class WorkerProcess(Child):
    """A real worker process: its consumer name is :attr:`name`.

    ``keys=None`` reads the keys of ``stream`` from the settings of ``env`` when first
    needed (never at start: a test may start a worker whose settings are wrong).
    """

    def __init__(
        self,
        proc: subprocess.Popen[bytes],
        consumer: str,
        keys: StreamKeys | None,
        log_path: Path,
        env: Mapping[str, str],
        stream: str = "transactions",
    ) -> None:
        super().__init__(consumer, proc, log_path)
        self.env = env
        self.stream = stream
        if keys is not None:
            self.__dict__["keys"] = keys

    @property
    def consumer(self) -> str:
        return self.name

    @cached_property
    def keys(self) -> StreamKeys:
        """The keys of its stream under the settings of its environment."""
        return keys_for(settings_from_env(self.env), self.stream)

    def lease_alive(self, client: RedisClient, keys: StreamKeys | None = None) -> bool:
        return bool(client.exists((keys or self.keys).lease(self.name)))

    def ready(self, client: RedisClient, keys: StreamKeys | None = None) -> bool:
        """Logged ``started`` and holds its lease; raises if the process has exited."""
        if not self.alive():
            raise WorkerExited(
                f"worker {self.name} exited with {self.proc.returncode}:\n{self.tail(40)}"
            )
        return self.lease_alive(client, keys) and bool(self.events("started"))

    def wait_ready(self, client: RedisClient, timeout_s: float = 15.0) -> WorkerProcess:
        """Wait until :meth:`ready`: what follows is its read loop, not its start-up
        (a test that froze or starved the server before it would meet start-up's retries)."""
        wait_until(lambda: self.ready(client), timeout_s, 0.02, f"worker {self.name} ready")
        return self


#: The ``start_worker`` fixture: ``start_worker(stream, consumer, processor, env, args)``.
StartWorker = Callable[..., WorkerProcess]


def _popen(argv: Sequence[str], env: Mapping[str, str], log_path: Path) -> subprocess.Popen[bytes]:
    with log_path.open("ab") as log:
        return subprocess.Popen(
            list(argv),
            env=dict(env),
            cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def _fresh_log(log_dir: Path, name: str) -> Path:
    """A log file of this process alone: two processes given one consumer name (a
    restarted worker, a name taken over) never share one, so each one's events are its."""
    path, n = log_dir / f"{name}.log", 2
    while path.exists():
        path, n = log_dir / f"{name}.{n}.log", n + 1
    return path


def launch_worker(
    env: Mapping[str, str],
    log_dir: Path,
    stream: str = "transactions",
    consumer: str | None = None,
    processor: str | None = TEST_PROCESSOR,
    args: Sequence[str] = (),
) -> WorkerProcess:
    """Start one worker of ``stream`` with ``env``; its log goes to ``log_dir``.

    ``processor=None`` keeps the stream's own processor (the domain processor).
    """
    name = consumer or f"w{next(_names)}-{os.getpid()}"
    log_path = _fresh_log(log_dir, name)
    proc = _popen(worker_command(stream, name, processor, args), env, log_path)
    return WorkerProcess(proc, name, None, log_path, env, stream)


def wait_leases(
    client: RedisClient,
    keys: StreamKeys,
    workers: Sequence[Child],
    timeout_s: float = 60.0,
) -> None:
    """Wait until every worker (of the stream of ``keys``) is ready: it has logged
    ``started`` and holds its lease, so it is in its read loop. Raises if one exits."""

    def all_ready() -> bool:
        ready = [_worker(child).ready(client, keys) for child in workers]
        return all(ready)

    wait_until(all_ready, timeout_s, interval_s=0.05, what="workers ready")


def _worker(child: Child) -> WorkerProcess:
    if not isinstance(child, WorkerProcess):
        raise TypeError(f"{child.name} is not a worker process")
    return child


# --- a fleet ------------------------------------------------------------------------------


@dataclass
class Fleet:
    """Owns the child processes of a test or a bench; whatever is still alive at exit is
    SIGKILLed, so an interrupted run never leaves strays behind."""

    log_dir: Path
    children: list[Child] = field(default_factory=list)

    def spawn(self, name: str, argv: Sequence[str], env: Mapping[str, str]) -> Child:
        """Any child process (a baseline loop, an idle process), its log in ``log_dir``."""
        log_path = self.log_dir / f"{name}.log"
        return self.adopt(Child(name, _popen(argv, env, log_path), log_path))

    def worker(
        self,
        stream: str,
        consumer: str,
        env: Mapping[str, str],
        processor: str | None = None,
        count: int | None = None,
        block_ms: int | None = None,
        simulate_latency_ms: int | None = None,
        extra: Sequence[str] = (),
    ) -> WorkerProcess:
        """One worker of ``stream`` with the given flags (``processor=None``: the stream's own)."""
        args: list[str] = []
        if count is not None:
            args += ["--count", str(count)]
        if block_ms is not None:
            args += ["--block-ms", str(block_ms)]
        if simulate_latency_ms is not None:
            args += ["--simulate-latency-ms", str(simulate_latency_ms)]
        worker = launch_worker(env, self.log_dir, stream, consumer, processor, [*args, *extra])
        return self.adopt(worker)

    def adopt(self, child: C) -> C:
        """Own ``child`` (started elsewhere): it is killed when the fleet closes."""
        self.children.append(child)
        return child

    def close(self) -> None:
        """SIGKILL every child and whatever it started (a worker's batch lane process, also
        one whose worker was killed earlier and is still winding down), and wait for them
        to be gone: no process of this fleet writes to Redis after it closes (the next
        test's server, flushed, would find it there)."""
        kill_with_strays(self.children)

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


# --- a worker of a model API ----------------------------------------------------------------

#: The model each API's workers name in their requests.
MODEL_NAMES = {"openai": "gpt-4o-mini", "anthropic": "claude-3-5-haiku-latest"}


def model_api_worker(
    fleet: Fleet, settings: Settings, name: str, *, api: str = "openai", **values: Any
) -> WorkerProcess:
    """``python -m workers.watch_transactions --consumer name`` speaking ``api`` (its model
    from :data:`MODEL_NAMES`, 100 output tokens, 4 messages at once, the suite's fast
    timings), with ``values`` (settings' field names: ``analyzer_url`` at least)."""
    env = child_env(
        settings.redis_url_value,
        settings.home_dir,
        analyzer_api=api,
        analyzer_model=MODEL_NAMES[api],
        analyzer_max_output_tokens=100,
        worker_concurrency=4,
        **values,
    )
    env.update(FAST_TIMINGS)
    command = [sys.executable, "-m", "workers.watch_transactions", "--consumer", name]
    child = fleet.spawn(name, command, env)
    return WorkerProcess(child.proc, child.name, None, child.log_path, env, "transactions")
