"""Real workers on a scenario's messages: started, fed, stopped, and what they leave behind.

What the analyzer scenarios share beyond :mod:`bench.timing`: N ``python -m
workers.watch_transactions`` processes (the entry point users run), each with a metrics
port, children of a harness ``Fleet`` the ``with`` block of :func:`started` owns (so a
failing scenario still stops them), handed over once each holds its lease; their messages
(transactions ``t<index>``), parked for a timed release or in the stream before they
start; and their figures: the results stream's entries by ``driver_used`` (``analyzer``:
the model's verdict, ``fallback``: the rules') and the series of their metrics ports.
"""

from __future__ import annotations

import contextlib
import json
import subprocess
import urllib.request
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import cast

import redis

from bench.timing import park, raw_client, release
from sentinel_platform.redis_server import free_port
from sentinel_platform.settings import load_settings
from sentinel_platform.streams.plumbing.keys import StreamKeys, transaction_keys
from sentinel_platform_tests.harness.processes import PYTHON, Fleet, WorkerProcess, wait_leases
from sentinel_platform_tests.harness.streams import fill_stream

TRANSACTION = {
    "merchant": "ACME Corp",
    "category": "retail",
    "currency": "EUR",
    "amount": 123.45,
    "message": "bench",
    "source": "bench",
    "timestamp": "2026-01-01T00:00:00Z",
}


def transactions(count: int, copies: int = 1) -> Iterator[dict[str, str]]:
    """``count`` transactions in the wire format, each id ``copies`` times in a row."""
    for index in range(count * copies):
        body = {**TRANSACTION, "id": f"t{index // copies}"}
        yield {"data": json.dumps(body, separators=(",", ":"))}


def spawn(fleet: Fleet, name: str, env: Mapping[str, str], args: Sequence[str]) -> WorkerProcess:
    """``python -m workers.watch_transactions`` (the entry point users run)."""
    log_path = fleet.log_dir / f"{name}.log"
    argv = [PYTHON, "-m", "workers.watch_transactions", "--consumer", name, *args]
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            argv, env=dict(env), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
        )
    return fleet.adopt(WorkerProcess(process, name, None, log_path, env))


def series(port: int, name: str) -> list[tuple[str, float]]:
    """Each series ``name`` of the worker's metrics port: (its line up to the value, the
    value); none when the port does not answer."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            text = reply.read().decode()
    except OSError:
        return []
    found = [line.rsplit(" ", 1) for line in text.splitlines() if line.startswith(name)]
    return [(labels, float(value)) for labels, value in found]


def metric(port: int, name: str, match: str = "") -> int | None:
    """The value of the worker's series ``name`` whose labels contain ``match``."""
    return next((int(value) for labels, value in series(port, name) if match in labels), None)


def drivers(results: Iterable[Mapping[str, str]]) -> Counter[str]:
    """Result entries by ``driver_used``: ``analyzer`` (the model's), ``fallback`` (the rules')."""
    return Counter(fields.get("driver_used", "") for fields in results)


@dataclass
class Workers:
    """Running workers: their processes and metrics ports, the stream's keys, a client."""

    client: redis.Redis
    keys: StreamKeys
    procs: list[WorkerProcess]
    ports: list[int]

    def metric(self, name: str, match: str = "") -> list[int | None]:
        """:func:`metric` of each worker."""
        return [metric(port, name, match) for port in self.ports]

    def results(self) -> list[dict[str, str]]:
        """The fields of every entry of the results stream."""
        entries = cast(list[tuple[str, dict[str, str]]], self.client.xrange(self.keys.results))
        return [dict(fields) for _, fields in entries]

    def release(self, messages: Sequence[Mapping[str, str]]) -> float:
        """Parked ``messages`` readable at once (:func:`bench.timing.release`)."""
        return release(self.client, self.keys, messages[-1])

    def stop(self, timeout_s: float = 10.0) -> None:
        """SIGTERM each, then SIGKILL one still running after ``timeout_s``."""
        for proc in self.procs:
            proc.stop(timeout_s=timeout_s)


@contextlib.contextmanager
def started(
    url: str,
    home: Path,
    name: str,
    envs: Sequence[Mapping[str, str]],
    messages: Sequence[Mapping[str, str]],
    *,
    parked: bool = False,
    args: Sequence[str] = (),
    ready_s: float = 60.0,
) -> Iterator[Workers]:
    """An emptied database holding ``messages`` (``parked``: none readable until
    :meth:`Workers.release`), then a worker per environment of ``envs`` (``name-<i>``, with
    ``args`` and a metrics port of its own), yielded once every one holds its lease (waited
    for up to ``ready_s``)."""
    client = raw_client(url)
    keys = transaction_keys(load_settings(redis_url=url, home=home))
    if parked:
        park(client, keys, messages)
    else:
        client.flushdb()
        fill_stream(client, keys.stream, messages)
    ports = [free_port() for _ in envs]
    with Fleet(home) as fleet:
        procs = [
            spawn(fleet, f"{name}-{i}", env, [*args, "--metrics-port", str(port)])
            for i, (env, port) in enumerate(zip(envs, ports, strict=True))
        ]
        wait_leases(client, keys, procs, timeout_s=ready_s)
        yield Workers(client, keys, procs, ports)
