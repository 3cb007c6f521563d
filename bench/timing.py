"""What every scenario shares beyond the test harness (:mod:`sentinel_platform_tests.harness`:
processes, waits, processors, streams): the server, the timed release, figures, goals, the
command line.

Every figure a scenario prints is measured side by side in one run against one server, so
two numbers in one table share the machine, the server and the moment: the embedded one
(the binary ``sentinel up`` runs, on a free 127.0.0.1 port), or the server of ``REDIS_URL``
(a scratch database: scenarios clear it) to measure what users run. Processes under test
are children of a harness ``Fleet``, killed when the scenario ends, also on SIGTERM or
SIGHUP (:func:`exit_on_signals`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import redis

from sentinel_platform.redis_server import RedisServer, find_redis_server, server_identity
from sentinel_platform.settings import Settings, load_settings
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.streams import fill_stream
from sentinel_platform_tests.harness.waits import WaitTimeout


@dataclass(frozen=True)
class ExternalServer:
    """The server of ``REDIS_URL``: used as it is, never started or stopped here."""

    url: str

    def stop(self) -> None:
        """Nothing to stop: the server belongs to whoever runs it."""


@contextlib.contextmanager
def redis_server(config: Mapping[str, str] | None = None) -> Iterator[RedisServer | ExternalServer]:
    """The server of ``REDIS_URL`` if set (``config`` cannot apply to it), else a
    throw-away embedded server on a free port, stopped (or killed) on exit."""
    if url := os.environ.get("REDIS_URL"):
        if config:
            print(f"note: REDIS_URL is used as it is; not applied: {dict(config)}", flush=True)
        yield ExternalServer(url)
        return
    with tempfile.TemporaryDirectory(prefix="bench-redis-") as data_dir:
        server = RedisServer(find_redis_server(load_settings()), Path(data_dir), config=config)
        try:  # also when interrupted while it starts
            yield server.start()
        finally:
            server.stop()


def raw_client(url: str, **kwargs: Any) -> redis.Redis:
    """A plain client for the scenario's own observations (no retries hide anything)."""
    return redis.Redis.from_url(url, decode_responses=True, socket_timeout=30, **kwargs)


def bench_settings(url: str, home: Path, **overrides: Any) -> Settings:
    return load_settings(redis_url=url, home=home, **overrides)


@contextlib.contextmanager
def scratch_dir(prefix: str) -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        yield Path(tmp)


# --- the timed release -----------------------------------------------------------------------


def park(client: redis.Redis, keys: StreamKeys, messages: Sequence[Mapping[str, str]]) -> None:
    """An emptied database, then all but the last message in the stream with the group
    parked at its end: nothing is readable until :func:`release`, so start-up and imports
    of the processes under test are never timed."""
    client.flushdb()
    fill_stream(client, keys.stream, messages[:-1])
    client.xgroup_create(keys.stream, keys.group, id="$")


def release(client: redis.Redis, keys: StreamKeys, last: Mapping[str, str]) -> float:
    """Make everything readable at once (one ``MULTI``: the group back to ``0``, the last
    message added, the server's ``TIME``); the server's clock at that moment (ms)."""
    pipe = client.pipeline(transaction=True)
    pipe.xgroup_setid(keys.stream, keys.group, "0", entries_read=0)
    pipe.xadd(keys.stream, cast(Any, dict(last)))
    pipe.time()
    seconds, micros = pipe.execute()[-1]
    return float(seconds * 1000 + micros / 1000)


def server_ms(client: redis.Redis) -> float:
    """The server's clock (ms): the one clock stream ids are compared with."""
    seconds, micros = client.time()
    return float(seconds * 1000 + micros / 1000)


def id_ms(stream_id: str) -> int:
    """The server time (ms) a stream entry was added at."""
    return int(stream_id.split("-", 1)[0])


# --- statistics, tables, goals ------------------------------------------------------------


def distribution(values: Sequence[float], digits: int = 3) -> dict[str, float]:
    """n, p5/p50/p95 (linear between the closest ranks) and max of a non-empty sample."""
    sample = list(values) * (2 if len(values) == 1 else 1)  # one value is every percentile
    cuts = statistics.quantiles(sample, n=20, method="inclusive")
    shown = {"p5": cuts[0], "p50": cuts[9], "p95": cuts[18], "max": max(values)}
    return {"n": len(values), **{k: round(v, digits) for k, v in shown.items()}}


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


def verdict(value: float | None, goal: float, *, at_most: bool = False) -> str:
    """PASS when ``value`` meets ``goal`` (>=, or <= with ``at_most``); unmeasured: MISS."""
    if value is None or math.isnan(value):
        return "MISS"
    return "PASS" if (value <= goal if at_most else value >= goal) else "MISS"


@dataclass(frozen=True)
class Goal:
    """A scenario's goal, its figure and the target; ``make bench`` collects the lines."""

    text: str
    value: float | None
    goal: float
    at_most: bool = False
    unit: str = "x"

    @property
    def verdict(self) -> str:
        return verdict(self.value, self.goal, at_most=self.at_most)

    def line(self) -> str:
        shown = "not measured" if self.value is None else f"{self.value}{self.unit}"
        return f"  {self.verdict:<4}  {self.text}: {shown}"


def print_goals(goals: Sequence[Goal]) -> dict[str, str]:
    """Print one line per goal (after a blank line); each goal's text and verdict."""
    print()
    for goal in goals:
        print(goal.line())
    return {goal.text: goal.verdict for goal in goals}


def judged(name: str, figures: dict[str, Any], goals: Sequence[Goal], info: Any) -> int:
    """The goals' lines, then the JSON line: ``figures`` with each goal's verdict (under
    ``goals``) and ``info`` (under ``machine``); the exit status: 0 when every goal passed."""
    figures["goals"] = print_goals(goals)
    emit_json(name, {**figures, "machine": info})
    return 0 if all(v == "PASS" for v in figures["goals"].values()) else 1


# --- what was measured on, the JSON line ---------------------------------------------------


def machine_info(client: redis.Redis | None = None) -> dict[str, Any]:
    """What the figures were measured on (contention included: load average), with the
    server's name and version and where it came from (``embedded`` or ``REDIS_URL``)."""
    info: dict[str, Any] = {
        "nproc": os.cpu_count(),
        "cpu": _cpu_model(),
        "ram_gb": round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1),
        "python": platform.python_version(),
        "loadavg_1m": round(os.getloadavg()[0], 2),
    }
    if client is not None:
        info["server"] = server_identity(client.info("server"))
        info["server_source"] = "REDIS_URL" if os.environ.get("REDIS_URL") else "embedded"
    return info


def _cpu_model() -> str:
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown"


def emit_json(bench: str, payload: Mapping[str, Any]) -> None:
    """The one machine-readable line of a scenario, printed as soon as its figures are
    known (only the line naming its chart may follow)."""
    print(json.dumps({"bench": bench, **payload}, sort_keys=False, default=str), flush=True)


# --- the command line ---------------------------------------------------------------------


def exit_on_signals(signums: Sequence[int] = (signal.SIGTERM, signal.SIGHUP)) -> None:
    """Make ``signums`` raise ``SystemExit(128 + signum)`` in the main thread, once: by
    default SIGTERM skips every ``finally`` and the scenario's server and workers would
    keep running; as ``SystemExit`` it unwinds the ``with`` blocks that stop them. A repeated
    signal is ignored during that clean-up. Only default handlers are replaced."""
    if threading.current_thread() is not threading.main_thread():
        return

    def leave(signum: int, _frame: object) -> None:
        for number in signums:
            signal.signal(number, signal.SIG_IGN)  # one clean-up, not one per signal
        raise SystemExit(128 + signum)

    for signum in signums:
        if signal.getsignal(signum) == signal.SIG_DFL:
            signal.signal(signum, leave)


@contextlib.contextmanager
def part(name: str, errors: list[str]) -> Iterator[None]:
    """Run one part of a scenario: its failure (a wait that timed out, a worker that exited,
    a server that went away) is recorded in ``errors`` and printed, and the others still run."""
    try:
        yield
    except (WaitTimeout, RuntimeError, OSError, redis.RedisError) as exc:
        errors.append(f"{name}: {exc}")
        print(f"  {name} failed: {exc}", flush=True)


def base_parser(name: str, doc: str | None) -> argparse.ArgumentParser:
    """The scenario's argument parser (``--quick``), described by the first line of its
    docstring; a scenario calls it first, so it also installs :func:`exit_on_signals`."""
    exit_on_signals()
    parser = argparse.ArgumentParser(
        prog=f"python -m bench {name}", description=(doc or name).splitlines()[0]
    )
    parser.add_argument(
        "--quick", action="store_true", help="smaller run that finishes in a few minutes"
    )
    return parser


@contextlib.contextmanager
def checkout(home: Path, rev: str | None) -> Iterator[str | None]:
    """``rev`` checked out as ``home/ours@rev`` for the run (a detached worktree)."""
    if rev is None:
        yield None
        return
    tree = home / f"ours@{rev}"
    git = ["git", "-C", str(Path(__file__).resolve().parents[1]), "worktree"]
    subprocess.run([*git, "add", "--detach", str(tree), rev], check=True, capture_output=True)
    try:
        yield tree.name
    finally:
        subprocess.run([*git, "remove", "--force", str(tree)], check=False, capture_output=True)


def tree_env(tree: Path) -> dict[str, str]:
    """What makes a child import ``tree``'s code (a :func:`checkout`) before this one's."""
    return {"PYTHONPATH": str(tree), "PYTHONSAFEPATH": "1"}
