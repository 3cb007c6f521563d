"""One cell of an analyzer scenario: real workers on N transactions, timed from one release.

A cell parks N messages (transactions ``t<index>``), starts ``python -m
workers.watch_transactions`` processes (the entry point users run; the default processor:
the AML rules plus the analyzer of ``SENTINEL_ANALYZER_URL``), waits for their leases
(:func:`bench.fleet.started`) and releases everything at once (:mod:`bench.timing`). It
ends when the group is drained or its time budget is up. msg/s is the verdicts over the
time from the release to the last verdict's stream id (server clock); AI verdicts have
``driver_used=analyzer``, fallbacks ``driver_used=fallback``. A duplicate is a second
verdict for one transaction id.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

import redis

from bench.fleet import started
from bench.fleet import transactions as transactions  # (re-exported: the cells' messages)
from bench.timing import id_ms, print_table, server_ms
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.analyzer_stub import AnalyzerStub
from sentinel_platform_tests.harness.proc_stats import cpu_seconds, spent
from sentinel_platform_tests.harness.processes import child_env
from sentinel_platform_tests.harness.streams import group_drained, unacked

SAMPLE_S = 0.01  # the stub's call counter is sampled this often for the rate windows


def window_counts(samples: Sequence[tuple[float, int]], start: float) -> list[int]:
    """Calls in each full 1 s window from ``start`` (the first call) up to the last call,
    from samples of a monotonic counter (time, count) sorted by time: the count at a
    window's end minus at its start, each read from the last sample at or before that
    moment. A partial window at the end (the backlog ran dry) is left out."""
    if not samples:
        return []

    def at(moment: float) -> int:
        count = samples[0][1]
        for when, value in samples:
            if when > moment:
                break
            count = value
        return count

    final = samples[-1][1]
    end = next(when for when, value in samples if value == final)  # the last call seen
    windows, edge = [], start
    while edge + 1.0 <= end:
        windows.append(at(edge + 1.0) - at(edge))
        edge += 1.0
    return windows


@dataclass
class Cell:
    """The figures of one run of one or more workers."""

    label: str
    workers: int
    concurrency: str
    messages: int
    done: int = 0
    seconds: float = 0.0
    msgs_per_s: float = 0.0
    ai: int = 0
    fallbacks: int = 0
    dead_letters: int = 0
    duplicates: int = 0
    worker_ai: list[int] = field(default_factory=list)
    in_flight_limit: list[int] = field(default_factory=list)
    stub: dict[str, Any] = field(default_factory=dict)
    calls_per_key: dict[str, int] = field(default_factory=dict)
    windows: list[int] = field(default_factory=list)
    worker_cpu_us: float | None = None
    server_cpu_us: float | None = None
    errors: int = 0

    @property
    def ai_per_s(self) -> float:
        return self.ai / self.seconds if self.seconds else 0.0


#: A cell's row in the scenarios' tables: each column and how it reads a cell.
COLUMNS: dict[str, Callable[[Cell], Any]] = {
    "cell": lambda c: c.label,
    "workers": lambda c: c.workers,
    "C": lambda c: c.concurrency,
    "done": lambda c: f"{c.done}/{c.messages}",
    "s": lambda c: c.seconds,
    "msg/s": lambda c: c.msgs_per_s,
    "AI/s": lambda c: round(c.ai_per_s, 1),
    "fallback": lambda c: c.fallbacks,
    "dlq": lambda c: c.dead_letters,
    "dup": lambda c: c.duplicates,
    "calls": lambda c: c.stub.get("calls"),
    "peak serving": lambda c: c.stub.get("peak_serving"),
    "queue wait s": lambda c: round(c.stub["queue_wait_mean_s"], 3) if c.stub else None,
    "limit(s)": lambda c: ",".join(map(str, c.in_flight_limit)),
    "per-worker AI": lambda c: ",".join(map(str, c.worker_ai)),
    "worker us/msg": lambda c: c.worker_cpu_us,
    "server us/msg": lambda c: c.server_cpu_us,
    "errors": lambda c: c.errors,
}


def print_cells(title: str, cells: Iterable[Cell]) -> None:
    """One table of ``cells``, a row each (:data:`COLUMNS`)."""
    print_table(title, list(COLUMNS), [[read(c) for read in COLUMNS.values()] for c in cells])


def cell_json(cell: Cell) -> dict[str, Any]:
    """A cell's figures, its calls per key summed up (not one entry per key)."""
    figures = {k: v for k, v in asdict(cell).items() if k != "calls_per_key"}
    per_key = cell.calls_per_key.values()
    figures["calls_for_keys"] = {
        "keys": len(cell.calls_per_key),
        "calls": sum(per_key),
        "keys_called_more_than_once": sum(1 for n in per_key if n > 1),
    }
    return {**figures, "ai_per_s": round(cell.ai_per_s, 1)}


def noop_messages(count: int) -> Iterator[dict[str, str]]:
    """Messages of the harness's no-op processor (its natural key is ``key``)."""
    for index in range(count):
        yield {"key": f"m{index}", "data": "{}"}


def redis_cpu_s(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


class Sampler:
    """Samples the stub's call counter every :data:`SAMPLE_S` on its own thread (owned
    by the ``with`` block, stopped and joined on exit)."""

    def __init__(self, stub: AnalyzerStub) -> None:
        self.stub, self.samples = stub, cast(list[tuple[float, int]], [])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stub-sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            self.samples.append((time.monotonic(), self.stub.counters()["calls"]))

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def first_call(self) -> float | None:
        return next((when for when, calls in self.samples if calls > 0), None)


def run_cell(
    label: str,
    url: str,
    home: Path,
    *,
    messages: list[dict[str, str]],
    budget_s: float,
    workers: int = 1,
    concurrency: str | None = None,
    stub: AnalyzerStub | None = None,
    processor: str | None = None,
    settings: Mapping[str, Any] | None = None,
    poll_s: float = 0.01,
    env_extra: Mapping[str, str] | None = None,
) -> Cell:
    """``workers`` workers on ``messages`` until drained or ``budget_s`` is up
    (``env_extra``: added to their environment, e.g. another tree's ``tree_env``)."""
    values: dict[str, Any] = {"lag_key_ttl_s": 10}
    if stub is not None:
        values.update(analyzer_url=stub.url, analyzer_timeout_s=5.0)
    values.update(settings or {})  # an analyzer of their own, another timeout
    if concurrency is not None:
        values["worker_concurrency"] = concurrency
    env = {**child_env(url, home, **values), **(env_extra or {})}
    cell = Cell(label, workers, concurrency or "default", len(messages))
    args = ["--processor", processor] if processor else []
    slug = label.replace(" ", "-").replace("=", "").replace("/", "-")
    with (
        started(url, home, slug, [env] * workers, messages, parked=True, args=args) as running,
        contextlib.ExitStack() as stack,
    ):
        client, keys, procs = running.client, running.keys, running.procs
        sampler = stack.enter_context(Sampler(stub)) if stub is not None else None
        before = redis_cpu_s(client)
        worker_before = [cpu_seconds(p.pid) for p in procs]
        started_ms = running.release(messages)
        deadline = time.monotonic() + budget_s
        while not group_drained(client, keys.stream, keys.group) and time.monotonic() < deadline:
            if not all(p.alive() for p in procs):
                raise RuntimeError(f"a worker exited:\n{procs[0].tail(30)}")
            time.sleep(poll_s)
        stopped_ms = server_ms(client)
        server_cpu_s = redis_cpu_s(client) - before
        worker_s = [spent(p.pid, cpu) for p, cpu in zip(procs, worker_before, strict=True)]
        verdicts = running.metric("sentinel_worker_verdicts_total", 'driver="analyzer"')
        cell.worker_ai = [n or 0 for n in verdicts]
        cell.in_flight_limit = [n or 0 for n in running.metric("sentinel_worker_in_flight_limit")]
        if stub is not None:
            cell.stub = stub.counters()
            cell.calls_per_key = dict(stub.calls_per_key())
        if sampler is not None:
            stack.close()
            first = sampler.first_call()
            cell.windows = window_counts(sampler.samples, first) if first is not None else []
        running.stop(timeout_s=5)
        for proc in procs:
            cell.errors += sum(1 for e in proc.events() if e.get("level") in ("error", "critical"))
    _settle_figures(client, keys, cell, started_ms, stopped_ms)
    if None not in worker_s and cell.done:
        cell.worker_cpu_us = round(sum(cast(list[float], worker_s)) / cell.done * 1e6, 1)
    cell.server_cpu_us = round(server_cpu_s / max(cell.done, 1) * 1e6, 1)
    return cell


def progress(cell: Cell) -> None:
    """A cell's line as it ends (its row of :func:`print_cells` comes with the report)."""
    print(
        f"  {cell.label:<24} {cell.done:>6,}/{cell.messages:<6,} in {cell.seconds:6.2f} s"
        f"  {cell.msgs_per_s:>8,.1f} msg/s  ai {cell.ai:,} fallback {cell.fallbacks:,}"
        f"  dlq {cell.dead_letters}  limit {cell.in_flight_limit}"
        f"  peak in flight {cell.stub.get('peak_in_flight')}  errors {cell.errors}",
        flush=True,
    )


class Cells:
    """A scenario's cells by key, each a :func:`run_cell` of ``budget_s`` unless it says
    otherwise, printed as it ends."""

    def __init__(self, url: str, home: Path, budget_s: float) -> None:
        self.url, self.home, self.budget_s = url, home, budget_s
        self.cells: dict[str, Cell] = {}

    def run(
        self,
        key: str,
        label: str,
        messages: list[dict[str, str]],
        concurrency: str | None,
        stub: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> Cell:
        """One cell, kept under ``key``; ``stub``: the arguments of the cell's own
        :class:`AnalyzerStub` (None: none); ``kwargs``: :func:`run_cell`'s."""
        kwargs = {"budget_s": self.budget_s, **kwargs}
        kwargs.update(messages=messages, concurrency=concurrency)
        with contextlib.ExitStack() as stack:
            if stub is not None:
                kwargs["stub"] = stack.enter_context(AnalyzerStub(**stub))
            self.cells[key] = cell = run_cell(label, self.url, self.home, **kwargs)
        progress(cell)
        return cell


def _settle_figures(
    client: redis.Redis, keys: StreamKeys, cell: Cell, started_ms: float, stopped_ms: float
) -> None:
    """Verdict counts and the rate, from the results stream (or the acks, for a no-op)."""
    verdicts = cast(list[tuple[str, dict[str, str]]], client.xrange(keys.results))
    cell.dead_letters = int(client.xlen(keys.dlq))
    if verdicts:
        # a transaction's verdict names it; a no-op's result is one entry per message
        txns = [fields.get("txn_id") or entry_id for entry_id, fields in verdicts]
        cell.done = len(set(txns))
        cell.duplicates = len(txns) - cell.done
        cell.ai = sum(1 for _, f in verdicts if f.get("driver_used") == "analyzer")
        cell.fallbacks = sum(1 for _, f in verdicts if f.get("driver_used") == "fallback")
        # the last verdict's time: also the rate over those done when the budget ran out
        stopped_ms = max(id_ms(entry_id) for entry_id, _ in verdicts)
    else:
        cell.done = cell.messages - unacked(client, keys.stream, keys.group)
    cell.seconds = round(max(stopped_ms - started_ms, 1.0) / 1000, 3)
    cell.msgs_per_s = round(cell.done / cell.seconds, 1)
