"""What the benchmarks share beyond the harness: the server, figures, the command line.

The processes, readiness, waits, processors and stream helpers are the tests' and the
benches' one harness, :mod:`sentinel_platform_tests.harness`.

Every figure a bench script prints is measured side by side in one run against one real
server, so two numbers in the same table always share the machine, the server and the
moment: the embedded one (the same binary ``sentinel up`` runs, started on a free
127.0.0.1 port), or the server of ``REDIS_URL`` when it is set, to measure what users run.
A bench clears the database it is given between phases, so ``REDIS_URL`` must name a
scratch database. The JSON line names the server and its version. Processes under
test (workers, baseline loops) are real child processes; a harness ``Fleet`` owns them and
SIGKILLs whatever is still running when the script ends, so an interrupted bench never
leaves strays behind: :func:`base_parser` turns SIGTERM and SIGHUP into ``SystemExit``
(SIGINT already raises ``KeyboardInterrupt``), so the ``with`` blocks that own the
server and the children run their clean-up as they do at a normal end.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import platform
import signal
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redis

from sentinel_platform.redis_server import RedisServer, find_redis_server, server_identity
from sentinel_platform.settings import Settings, load_settings

# --- redis ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExternalServer:
    """The server of ``REDIS_URL``: used as it is, never started or stopped here."""

    url: str

    def stop(self) -> None:
        """Nothing to stop: the server belongs to whoever runs it."""


def external_url() -> str | None:
    """``REDIS_URL`` when the bench should run on an existing server."""
    return os.environ.get("REDIS_URL") or None


@contextlib.contextmanager
def redis_server(
    config: Mapping[str, str] | None = None, data_dir: Path | None = None
) -> Iterator[RedisServer | ExternalServer]:
    """The server of ``REDIS_URL`` if set (``config`` cannot apply to it), else a
    throw-away embedded server on a free port, stopped (or killed) on exit."""
    url = external_url()
    if url:
        if config:
            print(f"note: REDIS_URL is used as it is; not applied: {dict(config)}", flush=True)
        yield ExternalServer(url)
        return
    with contextlib.ExitStack() as stack:
        if data_dir is None:
            data_dir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="bench-redis-")))
        binary = find_redis_server(load_settings())
        server = RedisServer(binary, data_dir, config=dict(config or {}))
        stack.callback(server.stop)  # also when interrupted while it starts
        yield server.start()


def raw_client(url: str, **kwargs: Any) -> redis.Redis:
    """A plain client for the bench's own observations (no retries hide anything)."""
    return redis.Redis.from_url(url, decode_responses=True, socket_timeout=30, **kwargs)


def server_version(client: redis.Redis) -> str:
    """``Valkey 8.1.8``, ``Redis 7.0.15``: the product and its own version."""
    return server_identity(client.info("server"))


def bench_settings(url: str, home: Path, **overrides: Any) -> Settings:
    return load_settings(redis_url=url, home=home, **overrides)


# --- statistics and reporting -------------------------------------------------------------


def percentile(values: Sequence[float], p: float) -> float:
    """Linear-interpolated percentile (p in 0..100) of a non-empty sample."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    rank = (len(ordered) - 1) * p / 100.0
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def distribution(values: Sequence[float], digits: int = 3) -> dict[str, float]:
    """p5/p50/p95/max of a sample, rounded for printing."""
    return {
        "n": len(values),
        "p5": round(percentile(values, 5), digits),
        "p50": round(percentile(values, 50), digits),
        "p95": round(percentile(values, 95), digits),
        "max": round(max(values), digits) if values else float("nan"),
    }


def ratio(numerator: float | None, denominator: float | None, digits: int = 3) -> float | None:
    """numerator / denominator, or None when either side was not measured."""
    if numerator is None or not denominator:
        return None
    return round(numerator / denominator, digits)


def print_table(title: str, headers: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    cells = [[str(h) for h in headers]] + [[_cell(v) for v in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    print(f"\n{title}")
    for index, row in enumerate(cells):
        print(
            "  " + "  ".join(value.rjust(width) for value, width in zip(row, widths, strict=True))
        )
        if index == 0:
            print("  " + "  ".join("-" * width for width in widths))
    sys.stdout.flush()


def _cell(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return "-" if value is None else str(value)


def machine_info(client: redis.Redis | None = None, source: str | None = None) -> dict[str, Any]:
    """What the figures were measured on (contention included: load average), with the
    server's name and version and where it came from (``embedded`` or ``REDIS_URL``)."""
    info: dict[str, Any] = {
        "nproc": os.cpu_count(),
        "cpu": _cpu_model(),
        "ram_gb": _ram_gb(),
        "python": platform.python_version(),
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }
    if client is not None:
        info["server"] = server_version(client)
        info["server_source"] = source or ("REDIS_URL" if external_url() else "embedded")
    return info


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def _ram_gb() -> float | None:
    with contextlib.suppress(OSError, ValueError, IndexError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return round(int(line.split()[1]) / 1024 / 1024, 1)
    return None


def emit_json(bench: str, payload: Mapping[str, Any]) -> None:
    """The one machine-readable line of a bench, printed as soon as its figures are known
    (only the line naming its chart may follow)."""
    print(json.dumps({"bench": bench, **payload}, sort_keys=False, default=str), flush=True)


def exit_on_signals(signums: Sequence[int] = (signal.SIGTERM, signal.SIGHUP)) -> None:
    """Make ``signums`` raise ``SystemExit(128 + signum)`` in the main thread, once.

    By default SIGTERM ends Python at once, skipping every ``finally``: the bench's
    ``redis-server`` and worker processes (children, not signalled) would keep running.
    Raised as ``SystemExit``, the signal unwinds the ``with`` blocks that stop them. A
    repeated signal is ignored while that clean-up runs (SIGKILL still ends it). Only
    default handlers are replaced, and only in a bench's main thread.
    """
    if threading.current_thread() is not threading.main_thread():
        return

    def leave(signum: int, _frame: object) -> None:
        for number in signums:
            signal.signal(number, signal.SIG_IGN)  # one clean-up, not one per signal
        raise SystemExit(128 + signum)

    for signum in signums:
        if signal.getsignal(signum) == signal.SIG_DFL:
            signal.signal(signum, leave)


def base_parser(description: str) -> argparse.ArgumentParser:
    """The bench's argument parser (``--quick``); a bench calls it first, so it also
    installs :func:`exit_on_signals`."""
    exit_on_signals()
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument(
        "--quick", action="store_true", help="smaller run that finishes in under 2 minutes"
    )
    return parser


@contextlib.contextmanager
def scratch_dir(prefix: str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        yield Path(tmp)
