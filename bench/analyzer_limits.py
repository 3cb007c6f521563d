"""Analyzer limits: real workers against an analyzer of capacity K and latency L.

Every cell is real: ``python -m workers.watch_transactions`` processes (the default
processor: the AML rules plus the analyzer of ``SENTINEL_ANALYZER_URL``) against an
:class:`AnalyzerStub` on 127.0.0.1 and a redis-server started by the bench (or
``REDIS_URL``). One worker on the defaults unless a cell says otherwise. The cells the
goals state "on defaults" are measured twice, each with its own PASS/MISS: on the default
of ``SENTINEL_WORKER_CONCURRENCY`` (asked of a fresh interpreter at the start) and on
``auto`` (the adaptive limit); when the default is ``auto`` already, on ``auto`` and on
C = 1, the previous default (in ``--quick`` only without limits: one call at a time
gives about 1 / L whatever the limits).

A cell fills the stream with N transactions (ids ``t<index>``) with the group parked at
its end, starts the workers, waits for their leases, then releases everything at once
(one ``MULTI``: the group back to ``0``, the last transaction added, the server's
``TIME``). It ends when the group is drained or its time budget is up. msg/s is the
verdicts (entries of ``sentinel:verdicts``) over the time from the release to the last
verdict's stream id (server clock); AI verdicts are those with ``driver_used=analyzer``,
fallbacks those with ``driver_used=fallback``; dead letters are the entries of the DLQ.

Scenarios (goals printed with PASS/MISS; a figure that could not be measured is a MISS):

* ``unlimited``: no limit, L = 100 ms: the default and ``auto`` against the best of
  C = 8, 32, 128 in the same run (>= 0.8x).
* ``reject``: K = 8, 429 + ``Retry-After: 1`` beyond K: AI verdicts/s >= 0.7x K/L,
  0 fallbacks, 0 dead letters.
* ``queue``: K = 8, queueing beyond K: >= 0.8x K/L, mean wait in the stub's queue
  <= 0.5 L.
* ``shared``: three workers, the reject-mode K = 8 analyzer: together >= 0.8x K/L, each
  worker's AI verdicts (its ``verdicts_total{driver="analyzer"}`` metric) within 2x of the
  others'.
* ``rate``: ``SENTINEL_ANALYZER_RATE_LIMIT`` = R = 100/s over three workers, no capacity
  limit: calls the stub received in every full 1 s window after the first (sampled every
  10 ms) within max(5%, 1 call) of R; msg/s >= 0.9 R.
* ``cpu``: the no-op processor and the rules (no analyzer) on ``auto`` and on C = 1,
  interleaved, medians of 3: auto >= 0.95x C = 1 for each.
* ``copies``: three workers, 24 keys x 3 copies (each key's copies adjacent in the
  stream): analyzer calls (the stub's count per ``payload.id``) = 24; also at C = 1, where
  each worker holds one message, so a key's copies are certainly on three workers at once.
* ``server``: C = 32 against a 100 ms analyzer: the server's ``INFO cpu`` (user + sys)
  over the run, divided by the messages: <= 60 us.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import math
import os
import statistics
import subprocess
import threading
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

import redis

from bench._common import (
    base_parser,
    emit_json,
    machine_info,
    print_table,
    ratio,
    raw_client,
    redis_server,
    scratch_dir,
)
from sentinel_platform.redis_server import free_port
from sentinel_platform.settings import load_settings
from sentinel_platform.streams.plumbing.keys import StreamKeys, transaction_keys
from sentinel_platform_tests.harness.analyzer_stub import AnalyzerStub, Mode
from sentinel_platform_tests.harness.processes import (
    NOOP_PROCESSOR,
    PYTHON,
    Fleet,
    WorkerProcess,
    child_env,
    wait_leases,
)
from sentinel_platform_tests.harness.streams import fill_stream, group_drained
from sentinel_platform_tests.harness.waits import WaitTimeout

NAME = "analyzer_limits"
LATENCY_S = 0.1
CAPACITY = 8
RATE = 100.0
COPIES_KEYS, COPIES_EACH = 24, 3
FIXED_CONCURRENCIES = (8, 32, 128)
SERVER_CPU_CONCURRENCY = 32
#: Ideal seconds of work of a cell at its expected best rate, and the cell's time budget.
WINDOW_S = {"quick": 3.5, "full": 15.0}
BUDGET_S = {"quick": 5.5, "full": 30.0}
#: Messages of each CPU-bound run (no-op, rules) and how many interleaved pairs.
CPU_MESSAGES = {
    "quick": {"noop": 30_000, "rules": 15_000},
    "full": {"noop": 150_000, "rules": 60_000},
}
#: Seconds of calls at the rate limit R (the windows need several full seconds).
RATE_WINDOW_S = {"quick": 6.0, "full": 20.0}
CPU_REPEATS = 3
SAMPLE_S = 0.01  # the stub's call counter is sampled this often for the rate windows

GOAL_UNLIMITED = 0.8
GOAL_REJECT = 0.7
GOAL_QUEUE = 0.8
GOAL_QUEUE_WAIT = 0.5  # x L
GOAL_SHARED = 0.8
GOAL_FAIRNESS = 2.0
GOAL_RATE_TOLERANCE = 0.05
GOAL_RATE_THROUGHPUT = 0.9
GOAL_CPU_BOUND = 0.95
GOAL_SERVER_CPU_US = 60.0
TRANSACTION = {
    "merchant": "ACME Corp",
    "category": "retail",
    "currency": "EUR",
    "amount": 123.45,
    "message": "bench",
    "source": "bench",
    "timestamp": "2026-01-01T00:00:00Z",
}


# --- goal arithmetic (pure) ---------------------------------------------------------------


def verdict(value: float | None, goal: float, *, at_most: bool = False) -> str:
    """PASS when ``value`` meets ``goal`` (>=, or <= with ``at_most``); unmeasured: MISS."""
    if value is None or math.isnan(value):
        return "MISS"
    return "PASS" if (value <= goal if at_most else value >= goal) else "MISS"


def spread(values: Sequence[float]) -> float | None:
    """Largest over smallest of ``values`` (inf when one is 0, None when there are none):
    each is within that factor of the others."""
    if not values:
        return None
    low, high = min(values), max(values)
    if low <= 0:
        return math.inf if high > 0 else 1.0
    return round(high / low, 3)


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


def rate_tolerance(rate: float) -> float:
    """How far a 1 s window may be from ``rate``: max(5%, 1 call)."""
    return max(GOAL_RATE_TOLERANCE * rate, 1.0)


def worst_window_error(windows: Sequence[int], rate: float) -> float | None:
    """The largest |window - rate| over the windows after the first, or None without any."""
    later = windows[1:]
    return max(abs(count - rate) for count in later) if later else None


def median_ratio(numerators: Sequence[float], denominators: Sequence[float]) -> float | None:
    """Median of ``numerators`` over the median of ``denominators`` (None if either is
    empty)."""
    if not numerators or not denominators:
        return None
    return ratio(statistics.median(numerators), statistics.median(denominators))


# --- one cell -------------------------------------------------------------------------------


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


def transactions(count: int, copies: int = 1) -> Iterator[dict[str, str]]:
    """``count`` transactions in the wire format, each id ``copies`` times in a row."""
    for index in range(count * copies):
        body = {**TRANSACTION, "id": f"t{index // copies}"}
        yield {"data": json.dumps(body, separators=(",", ":"))}


def noop_messages(count: int) -> Iterator[dict[str, str]]:
    """Messages of the harness's no-op processor (its natural key is ``key``)."""
    for index in range(count):
        yield {"key": f"m{index}", "data": "{}"}


def _spawn(fleet: Fleet, name: str, env: Mapping[str, str], args: Sequence[str]) -> WorkerProcess:
    """``python -m workers.watch_transactions`` (the entry point users run)."""
    log_path = fleet.log_dir / f"{name}.log"
    argv = [PYTHON, "-m", "workers.watch_transactions", "--consumer", name, *args]
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            argv, env=dict(env), stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
        )
    return fleet.adopt(WorkerProcess(process, name, None, log_path, env))


def _server_cpu_s(client: redis.Redis) -> float:
    info = client.info("cpu")
    return float(info["used_cpu_sys"]) + float(info["used_cpu_user"])


def _process_cpu_s(pid: int) -> float | None:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _metric(port: int, name: str, match: str = "") -> int | None:
    """The value of the worker's series ``name`` whose labels contain ``match``."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5) as reply:
            text = reply.read().decode()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith(name) and match in line and not line.startswith("#"):
            return int(float(line.rsplit(" ", 1)[1]))
    return None


def _release(client: redis.Redis, keys: StreamKeys, last: Mapping[str, str]) -> float:
    """Everything readable at once; the server's clock then (ms)."""
    pipe = client.pipeline(transaction=True)
    pipe.xgroup_setid(keys.stream, keys.group, "0", entries_read=0)
    pipe.xadd(keys.stream, cast(Any, dict(last)))
    pipe.time()
    seconds, micros = pipe.execute()[-1]
    return float(seconds * 1000 + micros / 1000)


class _Sampler:
    """Samples the stub's call counter every :data:`SAMPLE_S` on its own thread (owned
    by the ``with`` block, stopped and joined on exit)."""

    def __init__(self, stub: AnalyzerStub) -> None:
        self.stub, self.samples = stub, cast(list[tuple[float, int]], [])
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="stub-sampler", daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(SAMPLE_S):
            self.samples.append((time.monotonic(), self.stub.counters()["calls"]))

    def __enter__(self) -> _Sampler:
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
) -> Cell:
    """``workers`` workers on ``messages`` until drained or ``budget_s`` is up."""
    client = raw_client(url)
    keys = transaction_keys(load_settings(redis_url=url, home=home))
    client.flushdb()
    fill_stream(client, keys.stream, messages[:-1])
    client.xgroup_create(keys.stream, keys.group, id="$")
    values: dict[str, Any] = {"lag_key_ttl_s": 10, **(settings or {})}
    if stub is not None:
        values.update(analyzer_url=stub.url, analyzer_timeout_s=5.0)
    if concurrency is not None:
        values["worker_concurrency"] = concurrency
    env = child_env(url, home, **values)
    cell = Cell(label, workers, concurrency or "default", len(messages))
    ports = [free_port() for _ in range(workers)]
    with Fleet(home) as fleet, contextlib.ExitStack() as stack:
        args = ["--processor", processor] if processor else []
        slug = label.replace(" ", "-").replace("=", "").replace("/", "-")
        procs = [
            _spawn(fleet, f"{slug}-{i}", env, [*args, "--metrics-port", str(port)])
            for i, port in enumerate(ports)
        ]
        wait_leases(client, keys, procs)
        sampler = stack.enter_context(_Sampler(stub)) if stub is not None else None
        before = _server_cpu_s(client)
        worker_before = [_process_cpu_s(p.pid) for p in procs]
        started_ms = _release(client, keys, messages[-1])
        deadline = time.monotonic() + budget_s
        while not group_drained(client, keys.stream, keys.group) and time.monotonic() < deadline:
            if not all(p.alive() for p in procs):
                raise RuntimeError(f"a worker exited:\n{procs[0].tail(30)}")
            time.sleep(poll_s)
        seconds_now, micros = client.time()
        stopped_ms = seconds_now * 1000 + micros / 1000
        server_cpu_s = _server_cpu_s(client) - before
        worker_after = [_process_cpu_s(p.pid) for p in procs]
        cell.worker_ai = [
            _metric(p, "sentinel_worker_verdicts_total", 'driver="analyzer"') or 0 for p in ports
        ]
        cell.in_flight_limit = [_metric(p, "sentinel_worker_in_flight_limit") or 0 for p in ports]
        if stub is not None:
            cell.stub = stub.counters()
            cell.calls_per_key = dict(stub.calls_per_key())
        if sampler is not None:
            stack.close()
            first = sampler.first_call()
            cell.windows = window_counts(sampler.samples, first) if first is not None else []
        for proc in procs:
            proc.stop(timeout_s=5)
            cell.errors += sum(1 for e in proc.events() if e.get("level") in ("error", "critical"))
    _settle_figures(client, keys, cell, started_ms, stopped_ms)
    if None not in worker_before and None not in worker_after and cell.done:
        spent = sum(
            cast(float, a) - cast(float, b)
            for a, b in zip(worker_after, worker_before, strict=True)
        )
        cell.worker_cpu_us = round(spent / cell.done * 1e6, 1)
    cell.server_cpu_us = round(server_cpu_s / max(cell.done, 1) * 1e6, 1)
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
        stopped_ms = max(int(entry_id.split("-", 1)[0]) for entry_id, _ in verdicts)
    else:
        cell.done = cell.messages - _not_acknowledged(client, keys)
    cell.seconds = round(max(stopped_ms - started_ms, 1.0) / 1000, 3)
    cell.msgs_per_s = round(cell.done / cell.seconds, 1)


def _not_acknowledged(client: redis.Redis, keys: StreamKeys) -> int:
    """Entries of the stream the group has not acknowledged: pending or never delivered."""
    groups = client.xinfo_groups(keys.stream)
    group = next(g for g in groups if g["name"] == keys.group)
    undelivered = cast(list[Any], client.xrange(keys.stream, f"({group['last-delivered-id']}", "+"))
    return int(group["pending"]) + len(undelivered)


def _progress(cell: Cell) -> None:
    print(
        f"  {cell.label:<24} {cell.done:>6,}/{cell.messages:<6,} in {cell.seconds:6.2f} s"
        f"  {cell.msgs_per_s:>8,.1f} msg/s  ai {cell.ai:,} fallback {cell.fallbacks:,}"
        f"  dlq {cell.dead_letters}  limit {cell.in_flight_limit}  errors {cell.errors}",
        flush=True,
    )


# --- scenarios --------------------------------------------------------------------------------


@dataclass
class Context:
    url: str
    home: Path
    mode: str
    #: The default of SENTINEL_WORKER_CONCURRENCY a worker of this tree starts with.
    default: str = "1"
    cells: dict[str, Cell] = field(default_factory=dict)

    def sides(self, scenario: str) -> list[tuple[str, str | None]]:
        """The concurrencies each "on defaults" cell of ``scenario`` is measured with
        (None: the default). When the default is ``auto`` already, the auto cell stands
        for both, and C = 1 (the previous default) is measured instead: in every scenario
        of a full run, only without limits in ``--quick`` (one call at a time gives
        about 1 / L whatever the analyzer's limits)."""
        if self.default != "auto":
            return [*SIDES]
        if self.mode == "quick" and scenario != "unlimited":
            return [("auto", "auto")]
        return [("auto", "auto"), ("C=1", "1")]

    def run(self, key: str, label: str, **kwargs: Any) -> Cell:
        kwargs.setdefault("budget_s", BUDGET_S[self.mode])
        cell = run_cell(label, self.url, self.home, **kwargs)
        self.cells[key] = cell
        _progress(cell)
        return cell

    def count(self, rate: float) -> int:
        """Messages for a cell whose best rate is ``rate`` msg/s."""
        return max(40, math.ceil(rate * WINDOW_S[self.mode]))


#: The concurrencies each "on defaults" cell is measured with (None: the default).
SIDES: tuple[tuple[str, str | None], ...] = (("default", None), ("auto", "auto"))


def unlimited(ctx: Context) -> None:
    messages = list(transactions(ctx.count(128 / LATENCY_S)))
    for side, concurrency in (
        *ctx.sides("unlimited"),
        *((f"C={c}", str(c)) for c in FIXED_CONCURRENCIES),
    ):
        with AnalyzerStub(LATENCY_S) as stub:
            ctx.run(
                f"unlimited {side}",
                f"unlimited {side}",
                messages=messages,
                concurrency=concurrency,
                stub=stub,
            )


def limited(ctx: Context, mode: Mode, workers: int = 1) -> None:
    name = {"reject": "reject", "queue": "queue"}[mode] if workers == 1 else "shared"
    messages = list(transactions(ctx.count(CAPACITY / LATENCY_S)))
    for side, concurrency in ctx.sides(name):
        with AnalyzerStub(LATENCY_S, capacity=CAPACITY, mode=mode, retry_after="1") as stub:
            ctx.run(
                f"{name} {side}",
                f"{name} K={CAPACITY} {side}",
                messages=messages,
                workers=workers,
                concurrency=concurrency,
                stub=stub,
            )


def rate_limited(ctx: Context) -> None:
    messages = list(transactions(math.ceil(RATE * RATE_WINDOW_S[ctx.mode])))
    for side, concurrency in ctx.sides("rate"):
        with AnalyzerStub(LATENCY_S) as stub:
            ctx.run(
                f"rate {side}",
                f"rate R={RATE:g} {side}",
                messages=messages,
                workers=3,
                concurrency=concurrency,
                stub=stub,
                settings={"analyzer_rate_limit": RATE},
            )


def cpu_bound(ctx: Context) -> None:
    counts = CPU_MESSAGES[ctx.mode]
    kinds: dict[str, tuple[list[dict[str, str]], str | None]] = {
        "noop": (list(noop_messages(counts["noop"])), NOOP_PROCESSOR),
        "rules": (list(transactions(counts["rules"])), None),
    }
    for repeat in range(CPU_REPEATS):  # interleaved: drift hits both sides alike
        for kind, (messages, processor) in kinds.items():
            for side in ("auto", "1"):
                ctx.run(
                    f"{kind} C={side} #{repeat}",
                    f"{kind} C={side} #{repeat + 1}",
                    messages=messages,
                    concurrency=side,
                    processor=processor,
                    budget_s=120.0,
                    poll_s=0.005,
                )


def copies(ctx: Context) -> None:
    messages = list(transactions(COPIES_KEYS, COPIES_EACH))
    # C = 1 too: each worker then holds one message, so a key's adjacent copies are
    # certainly on three workers at once (with a larger limit one worker may read all
    # three, and its own in-flight keys already spare the second call).
    for side, concurrency in dict.fromkeys((*ctx.sides("copies"), ("C=1", "1"))):
        with AnalyzerStub(LATENCY_S) as stub:
            ctx.run(
                f"copies {side}",
                f"copies 3 workers {side}",
                messages=messages,
                workers=3,
                concurrency=concurrency,
                stub=stub,
                budget_s=30.0,
            )


def server_cpu(ctx: Context) -> None:
    c = SERVER_CPU_CONCURRENCY
    messages = list(transactions(ctx.count(c / LATENCY_S)))
    with AnalyzerStub(LATENCY_S) as stub:
        ctx.run(
            "server",
            f"server cpu C={c}",
            messages=messages,
            concurrency=str(c),
            stub=stub,
            poll_s=0.1,
        )


SCENARIOS: dict[str, Callable[[Context], None]] = {
    "unlimited": unlimited,
    "reject": lambda ctx: limited(ctx, "reject"),
    "queue": lambda ctx: limited(ctx, "queue"),
    "shared": lambda ctx: limited(ctx, "reject", workers=3),
    "rate": rate_limited,
    "cpu": cpu_bound,
    "copies": copies,
    "server": server_cpu,
}


# --- goals and report ---------------------------------------------------------------------


@dataclass(frozen=True)
class Goal:
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


def goal_sides(default: str) -> list[tuple[str, str]]:
    """(cell side, how goals name it): the default and auto, or, when auto is the
    default, auto and C = 1 (the default before it)."""
    if default == "auto":
        return [("auto", "auto (the default)"), ("C=1", "C=1 (the previous default)")]
    return [("default", f"default C={default}"), ("auto", "auto")]


def goals(cells: Mapping[str, Cell], ran: set[str], default: str) -> list[Goal]:
    """Every goal of every scenario that ran (a cell that is missing: not measured)."""
    out: list[Goal] = []
    ideal = CAPACITY / LATENCY_S
    get = cells.get
    for side, shown in goal_sides(default):
        # C = 1 beside an auto default is an extra cell: judged where it was measured
        def wanted(name: str, side: str = side) -> bool:
            return side != "C=1" or f"{name} C=1" in cells

        if "unlimited" in ran and wanted("unlimited"):
            fixed = [get(f"unlimited C={c}") for c in FIXED_CONCURRENCIES]
            best = max((c.msgs_per_s for c in fixed if c), default=None)
            cell = get(f"unlimited {side}")
            out.append(
                Goal(
                    f"no limit, L=100 ms, {shown}: >= {GOAL_UNLIMITED}x best of C=8/32/128",
                    ratio(cell.msgs_per_s, best) if cell else None,
                    GOAL_UNLIMITED,
                )
            )
        if "reject" in ran and wanted("reject"):
            cell = get(f"reject {side}")
            out.append(
                Goal(
                    f"K=8 429+Retry-After, {shown}: AI verdicts/s >= {GOAL_REJECT}x K/L",
                    ratio(cell.ai_per_s, ideal) if cell else None,
                    GOAL_REJECT,
                )
            )
            out.append(
                Goal(
                    f"K=8 429+Retry-After, {shown}: 0 rules fallbacks",
                    cell.fallbacks if cell else None,
                    0,
                    at_most=True,
                    unit="",
                )
            )
            out.append(
                Goal(
                    f"K=8 429+Retry-After, {shown}: 0 dead letters",
                    cell.dead_letters if cell else None,
                    0,
                    at_most=True,
                    unit="",
                )
            )
        if "queue" in ran and wanted("queue"):
            cell = get(f"queue {side}")
            wait = cell.stub.get("queue_wait_mean_s") if cell else None
            out.append(
                Goal(
                    f"K=8 queueing, {shown}: AI verdicts/s >= {GOAL_QUEUE}x K/L",
                    ratio(cell.ai_per_s, ideal) if cell else None,
                    GOAL_QUEUE,
                )
            )
            out.append(
                Goal(
                    f"K=8 queueing, {shown}: mean queue wait <= {GOAL_QUEUE_WAIT} L",
                    ratio(wait, LATENCY_S),
                    GOAL_QUEUE_WAIT,
                    at_most=True,
                    unit=" L",
                )
            )
        if "shared" in ran and wanted("shared"):
            cell = get(f"shared {side}")
            out.append(
                Goal(
                    f"3 workers, K=8 429, {shown}: together >= {GOAL_SHARED}x K/L",
                    ratio(cell.ai_per_s, ideal) if cell else None,
                    GOAL_SHARED,
                )
            )
            out.append(
                Goal(
                    f"3 workers, K=8 429, {shown}: each within {GOAL_FAIRNESS:g}x",
                    spread(cell.worker_ai) if cell else None,
                    GOAL_FAIRNESS,
                    at_most=True,
                )
            )
        if "rate" in ran and wanted("rate"):
            cell = get(f"rate {side}")
            worst = worst_window_error(cell.windows, RATE) if cell else None
            out.append(
                Goal(
                    f"R=100/s, 3 workers, {shown}: worst 1 s window off R / max(5%, 1 call) <= 1",
                    ratio(worst, rate_tolerance(RATE)),
                    1.0,
                    at_most=True,
                )
            )
            out.append(
                Goal(
                    f"R=100/s, 3 workers, {shown}: msg/s >= {GOAL_RATE_THROUGHPUT}x R",
                    ratio(cell.msgs_per_s, RATE) if cell else None,
                    GOAL_RATE_THROUGHPUT,
                )
            )
    if "copies" in ran:
        sides = list(dict.fromkeys([*(side for side, _ in goal_sides(default)), "C=1"]))
        for side in sides:
            cell = get(f"copies {side}")
            calls = sum(cell.calls_per_key.values()) if cell else None
            out.append(
                Goal(
                    f"copies, 3 workers, {side}: analyzer calls / {COPIES_KEYS} = 1",
                    ratio(calls, COPIES_KEYS),
                    1.0,
                    at_most=True,
                )
            )
    if "cpu" in ran:
        for kind in ("noop", "rules"):
            auto = [c.msgs_per_s for k, c in cells.items() if k.startswith(f"{kind} C=auto")]
            one = [c.msgs_per_s for k, c in cells.items() if k.startswith(f"{kind} C=1 ")]
            out.append(
                Goal(
                    f"{kind} processor: auto >= {GOAL_CPU_BOUND}x C=1 (medians of {CPU_REPEATS})",
                    median_ratio(auto, one),
                    GOAL_CPU_BOUND,
                )
            )
    if "server" in ran:
        cell = get("server")
        out.append(
            Goal(
                f"server CPU per message at C={SERVER_CPU_CONCURRENCY}, L=100 ms "
                f"<= {GOAL_SERVER_CPU_US:g} us",
                cell.server_cpu_us if cell else None,
                GOAL_SERVER_CPU_US,
                at_most=True,
                unit=" us",
            )
        )
    return out


def report(ctx: Context, ran: set[str], info: dict[str, Any], errors: list[str]) -> None:
    cells = ctx.cells
    print_table(
        f"workers against a stub analyzer (L={LATENCY_S * 1000:g} ms; K={CAPACITY} where limited)",
        [
            "cell",
            "workers",
            "C",
            "done",
            "s",
            "msg/s",
            "AI/s",
            "fallback",
            "dlq",
            "dup",
            "calls",
            "peak serving",
            "queue wait s",
            "limit(s)",
            "per-worker AI",
            "worker us/msg",
            "server us/msg",
            "errors",
        ],
        [
            (
                c.label,
                c.workers,
                c.concurrency,
                f"{c.done}/{c.messages}",
                c.seconds,
                c.msgs_per_s,
                round(c.ai_per_s, 1),
                c.fallbacks,
                c.dead_letters,
                c.duplicates,
                c.stub.get("calls"),
                c.stub.get("peak_serving"),
                round(c.stub["queue_wait_mean_s"], 3) if c.stub else None,
                ",".join(map(str, c.in_flight_limit)),
                ",".join(map(str, c.worker_ai)),
                c.worker_cpu_us,
                c.server_cpu_us,
                c.errors,
            )
            for c in cells.values()
        ],
    )
    rate_cells = [c for k, c in cells.items() if k.startswith("rate ")]
    for cell in rate_cells:
        print(f"  {cell.label}: calls per 1 s window: {cell.windows}")
    for kind in ("noop", "rules"):
        cpu = {
            side: [
                c.worker_cpu_us or 0.0
                for k, c in cells.items()
                if k.startswith(f"{kind} C={side} ")
            ]
            for side in ("auto", "1")
        }
        if cpu["auto"] and cpu["1"]:  # what contention cannot hide: CPU per message
            print(
                f"  {kind}: worker CPU per message, medians: auto "
                f"{statistics.median(cpu['auto']):.1f} us, C=1 {statistics.median(cpu['1']):.1f} us"
            )
    for cell in (c for k, c in cells.items() if k.startswith("copies ")):
        twice = sum(1 for n in cell.calls_per_key.values() if n > 1)
        print(
            f"  {cell.label}: {sum(cell.calls_per_key.values())} calls for "
            f"{len(cell.calls_per_key)} keys, {twice} keys called more than once"
        )
    print(f"\n  default SENTINEL_WORKER_CONCURRENCY of the workers: {ctx.default}")
    results = goals(cells, ran, ctx.default)
    print()
    for goal in results:
        print(goal.line())
    for error in errors:
        print(f"  failed: {error}")
    emit_json(
        NAME,
        {
            "default_concurrency": ctx.default,
            "cells": {k: _cell_json(c) for k, c in cells.items()},
            "goals": {g.text: {"value": g.value, "verdict": g.verdict} for g in results},
            "errors": errors,
            "machine": info,
        },
    )


def default_concurrency() -> str:
    """The default of ``SENTINEL_WORKER_CONCURRENCY`` a worker started now would use
    (asked of a fresh interpreter: this tree's code as it is on disk now)."""
    probe = (
        "from sentinel_platform.settings import load_settings\n"
        "print(load_settings().worker_concurrency_pinned or 'auto')"
    )
    env = child_env("redis://127.0.0.1:1/0", Path("/nonexistent"))
    out = subprocess.run(
        [PYTHON, "-c", probe], env=env, check=True, capture_output=True, text=True, timeout=60
    )
    return out.stdout.strip().splitlines()[-1]


def tree_state() -> str:
    """The commit, and a digest of the uncommitted changes to tracked files (others may
    edit the tree during a run): ``957460d+dirty:1a2b3c4d`` or ``957460d``."""
    repo = Path(__file__).resolve().parent.parent
    git = ["git", "--no-optional-locks", "-C", str(repo)]
    run = functools.partial(subprocess.run, capture_output=True, text=True, timeout=60)
    commit = run([*git, "rev-parse", "--short", "HEAD"]).stdout.strip() or "unknown"
    diff = run([*git, "diff", "HEAD"]).stdout
    if not diff:
        return commit
    return f"{commit}+dirty:{hashlib.sha256(diff.encode()).hexdigest()[:8]}"


def _cell_json(cell: Cell) -> dict[str, Any]:
    """A cell's figures, its calls per key summed up (not one entry per key)."""
    figures = {k: v for k, v in asdict(cell).items() if k != "calls_per_key"}
    per_key = cell.calls_per_key.values()
    figures["calls_for_keys"] = {
        "keys": len(cell.calls_per_key),
        "calls": sum(per_key),
        "keys_called_more_than_once": sum(1 for n in per_key if n > 1),
    }
    return {**figures, "ai_per_s": round(cell.ai_per_s, 1)}


def main() -> int:
    parser = base_parser(__doc__.splitlines()[0] if __doc__ else NAME)
    parser.add_argument(
        "--only",
        default=",".join(SCENARIOS),
        help=f"comma-separated scenarios: {','.join(SCENARIOS)}",
    )
    args = parser.parse_args()
    ran = set(args.only.split(","))
    unknown = ran - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenarios: {sorted(unknown)}")
    errors: list[str] = []
    with redis_server() as server, scratch_dir("bench-limits-") as tmp:
        info = machine_info(raw_client(server.url))
        info["tree"] = tree_state()
        ctx = Context(server.url, tmp, "quick" if args.quick else "full", default_concurrency())
        print(f"default SENTINEL_WORKER_CONCURRENCY: {ctx.default}; tree {info['tree']}")
        for name, scenario in SCENARIOS.items():
            if name not in ran:
                continue
            print(f"== {name}", flush=True)
            try:
                scenario(ctx)
            except (WaitTimeout, RuntimeError, OSError, redis.RedisError) as exc:
                errors.append(f"{name}: {exc}")
                print(f"  {name} failed: {exc}", flush=True)
        info["loadavg_1m_end"] = round(os.getloadavg()[0], 2)
        info["tree_end"] = tree_state()
        info["default_concurrency_end"] = default_concurrency()
        if info["tree_end"] != info["tree"]:  # a note, not a failure: the figures stand
            print(f"note: the working tree changed during the run: {info['tree_end']}")
    report(ctx, ran, info, errors)
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
