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

How a cell is run and timed: :mod:`bench.cells`.

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
  over the run, divided by the messages, median of three runs: <= 60 us.
"""

from __future__ import annotations

import functools
import hashlib
import math
import os
import statistics
import subprocess
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from bench import timing
from bench.cells import Cell, Cells, cell_json, noop_messages, print_cells, transactions
from sentinel_platform_tests.harness.analyzer_stub import Mode
from sentinel_platform_tests.harness.processes import NOOP_PROCESSOR

NAME = "analyzer_limits"
LATENCY_S = 0.1
CAPACITY = 8
RATE = 100.0
COPIES_KEYS, COPIES_EACH = 24, 3
FIXED_CONCURRENCIES = (8, 32, 128)
SERVER_CPU_CONCURRENCY = 32
#: Every cell's analyzer: a stub of latency L (and capacity K where limited).
STUB = {"latency_s": LATENCY_S}
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


# --- goal arithmetic (pure) ---------------------------------------------------------------


def spread(values: Sequence[float]) -> float | None:
    """Largest over smallest of ``values`` (inf when one is 0, None when there are none):
    each is within that factor of the others."""
    if not values:
        return None
    low, high = min(values), max(values)
    if low <= 0:
        return math.inf if high > 0 else 1.0
    return round(high / low, 3)


def rate_tolerance(rate: float) -> float:
    """How far a 1 s window may be from ``rate``: max(5%, 1 call)."""
    return max(GOAL_RATE_TOLERANCE * rate, 1.0)


def worst_window_error(windows: Sequence[int], rate: float) -> float | None:
    """The largest |window - rate| over the windows after the first, or None without any."""
    later = windows[1:]
    return max(abs(count - rate) for count in later) if later else None


def starting(cells: Mapping[str, Cell], prefix: str) -> list[Cell]:
    """The cells whose key starts with ``prefix``: a scenario's, a kind's, a side's."""
    return [cell for key, cell in cells.items() if key.startswith(prefix)]


def median_ratio(numerators: Sequence[float], denominators: Sequence[float]) -> float | None:
    """Median of ``numerators`` over the median of ``denominators`` (None if either is
    empty)."""
    if not numerators or not denominators:
        return None
    return timing.ratio(statistics.median(numerators), statistics.median(denominators))


# --- scenarios --------------------------------------------------------------------------------


class Context(Cells):
    """The run's cells, its mode (``quick`` or ``full``) and the workers' default."""

    def __init__(self, url: str, home: Path, mode: str) -> None:
        super().__init__(url, home, BUDGET_S[mode])
        self.mode = mode
        #: The default of SENTINEL_WORKER_CONCURRENCY (``auto``): C = 1 is the previous one.
        self.default = "auto"

    def sides(self, scenario: str) -> list[tuple[str, str | None]]:
        """The concurrencies each "on defaults" cell of ``scenario`` is measured with
        (None: the default): ``auto``, and C = 1 (the previous default) in every scenario
        of a full run, only without limits in ``--quick`` (one call at a time gives
        about 1 / L whatever the analyzer's limits)."""
        if self.mode == "quick" and scenario != "unlimited":
            return [("auto", "auto")]
        return [("auto", "auto"), ("C=1", "1")]

    def count(self, rate: float) -> int:
        """Messages for a cell whose best rate is ``rate`` msg/s."""
        return max(40, math.ceil(rate * WINDOW_S[self.mode]))


def unlimited(ctx: Context) -> None:
    messages = list(transactions(ctx.count(128 / LATENCY_S)))
    fixed = [(f"C={c}", str(c)) for c in FIXED_CONCURRENCIES]
    for side, concurrency in (*ctx.sides("unlimited"), *fixed):
        ctx.run(f"unlimited {side}", f"unlimited {side}", messages, concurrency, STUB)


def limited(ctx: Context, mode: Mode, workers: int = 1) -> None:
    name = {"reject": "reject", "queue": "queue"}[mode] if workers == 1 else "shared"
    messages = list(transactions(ctx.count(CAPACITY / LATENCY_S)))
    limits = {**STUB, "capacity": CAPACITY, "mode": mode, "retry_after": "1"}
    for side, concurrency in ctx.sides(name):
        label = f"{name} K={CAPACITY} {side}"
        ctx.run(f"{name} {side}", label, messages, concurrency, stub=limits, workers=workers)


def rate_limited(ctx: Context) -> None:
    messages = list(transactions(math.ceil(RATE * RATE_WINDOW_S[ctx.mode])))
    limit = {"analyzer_rate_limit": RATE}
    for side, concurrency in ctx.sides("rate"):
        label = f"rate R={RATE:g} {side}"
        ctx.run(f"rate {side}", label, messages, concurrency, STUB, workers=3, settings=limit)


def cpu_bound(ctx: Context) -> None:
    counts = CPU_MESSAGES[ctx.mode]
    kinds: dict[str, tuple[list[dict[str, str]], str | None]] = {
        "noop": (list(noop_messages(counts["noop"])), NOOP_PROCESSOR),
        "rules": (list(transactions(counts["rules"])), None),
    }
    for repeat in range(CPU_REPEATS):  # interleaved: drift hits both sides alike
        for kind, (messages, processor) in kinds.items():
            for side in ("auto", "1"):
                key, label = f"{kind} C={side} #{repeat}", f"{kind} C={side} #{repeat + 1}"
                ctx.run(key, label, messages, side, processor=processor, budget_s=120, poll_s=0.005)


def copies(ctx: Context) -> None:
    messages = list(transactions(COPIES_KEYS, COPIES_EACH))
    # C = 1 too: each worker then holds one message, so a key's adjacent copies are
    # certainly on three workers at once (with a larger limit one worker may read all
    # three, and its own in-flight keys already spare the second call).
    for side, concurrency in dict.fromkeys((*ctx.sides("copies"), ("C=1", "1"))):
        label = f"copies 3 workers {side}"
        ctx.run(f"copies {side}", label, messages, concurrency, STUB, workers=3, budget_s=30.0)


def server_cpu(ctx: Context) -> None:
    """``CPU_REPEATS`` cells (one in ``--quick``): the figure is their median, since this
    machine's CPU cost per unit of work drifts by +-10% between runs."""
    c = SERVER_CPU_CONCURRENCY
    messages = list(transactions(ctx.count(c / LATENCY_S)))
    for n in range(1 if ctx.mode == "quick" else CPU_REPEATS):
        label = f"server cpu C={c} #{n + 1}"
        ctx.run(f"server {n}", label, messages, str(c), STUB, poll_s=0.1)


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


def goal_sides(default: str) -> list[tuple[str, str]]:
    """(cell side, how goals name it): the default and auto, or, when auto is the
    default, auto and C = 1 (the default before it)."""
    if default == "auto":
        return [("auto", "auto (the default)"), ("C=1", "C=1 (the previous default)")]
    return [("default", f"default C={default}"), ("auto", "auto")]


def side_goals(name: str, shown: str, cell: Cell | None, best: float | None) -> list[timing.Goal]:
    """The goals of scenario ``name``'s "on defaults" cell measured on ``shown`` (``best``:
    the best fixed concurrency's msg/s without limits); a missing cell is not measured."""

    def of(read: Callable[[Cell], float | None]) -> float | None:
        return read(cell) if cell else None

    k8, k8q = f"K=8 429+Retry-After, {shown}", f"K=8 queueing, {shown}"
    shared, rate = f"3 workers, K=8 429, {shown}", f"R=100/s, 3 workers, {shown}"
    ai = of(lambda c: timing.ratio(c.ai_per_s, CAPACITY / LATENCY_S))  # x K/L
    wait = timing.ratio(of(lambda c: c.stub.get("queue_wait_mean_s")), LATENCY_S)
    worst = timing.ratio(of(lambda c: worst_window_error(c.windows, RATE)), rate_tolerance(RATE))
    table = {
        "unlimited": [
            timing.Goal(
                f"no limit, L=100 ms, {shown}: >= {GOAL_UNLIMITED}x best of C=8/32/128",
                of(lambda c: timing.ratio(c.msgs_per_s, best)),
                GOAL_UNLIMITED,
            )
        ],
        "reject": [
            timing.Goal(f"{k8}: AI verdicts/s >= {GOAL_REJECT}x K/L", ai, GOAL_REJECT),
            timing.Goal(f"{k8}: 0 rules fallbacks", of(lambda c: c.fallbacks), 0, True, ""),
            timing.Goal(f"{k8}: 0 dead letters", of(lambda c: c.dead_letters), 0, True, ""),
        ],
        "queue": [
            timing.Goal(f"{k8q}: AI verdicts/s >= {GOAL_QUEUE}x K/L", ai, GOAL_QUEUE),
            timing.Goal(
                f"{k8q}: mean queue wait <= {GOAL_QUEUE_WAIT} L", wait, GOAL_QUEUE_WAIT, True, " L"
            ),
        ],
        "shared": [
            timing.Goal(f"{shared}: together >= {GOAL_SHARED}x K/L", ai, GOAL_SHARED),
            timing.Goal(
                f"{shared}: each within {GOAL_FAIRNESS:g}x",
                of(lambda c: spread(c.worker_ai)),
                GOAL_FAIRNESS,
                True,
            ),
        ],
        "rate": [
            timing.Goal(f"{rate}: worst 1 s window off R / max(5%, 1 call) <= 1", worst, 1.0, True),
            timing.Goal(
                f"{rate}: msg/s >= {GOAL_RATE_THROUGHPUT}x R",
                of(lambda c: timing.ratio(c.msgs_per_s, RATE)),
                GOAL_RATE_THROUGHPUT,
            ),
        ],
    }
    return table[name]


def goals(cells: Mapping[str, Cell], ran: set[str], default: str) -> list[timing.Goal]:
    """Every goal of every scenario that ran (a cell that is missing: not measured)."""
    fixed = [cells.get(f"unlimited C={c}") for c in FIXED_CONCURRENCIES]
    best = max((c.msgs_per_s for c in fixed if c), default=None)
    out = [
        goal
        for side, shown in goal_sides(default)
        for name in ("unlimited", "reject", "queue", "shared", "rate")
        # C = 1 beside an auto default is an extra cell: judged where it was measured
        if name in ran and (side != "C=1" or f"{name} C=1" in cells)
        for goal in side_goals(name, shown, cells.get(f"{name} {side}"), best)
    ]
    if "copies" in ran:
        for side in dict.fromkeys([*(side for side, _ in goal_sides(default)), "C=1"]):
            cell = cells.get(f"copies {side}")
            calls = sum(cell.calls_per_key.values()) if cell else None
            text = f"copies, 3 workers, {side}: analyzer calls / {COPIES_KEYS} = 1"
            out.append(timing.Goal(text, timing.ratio(calls, COPIES_KEYS), 1.0, True))
    if "cpu" in ran:
        for kind in ("noop", "rules"):
            auto = [c.msgs_per_s for c in starting(cells, f"{kind} C=auto")]
            one = [c.msgs_per_s for c in starting(cells, f"{kind} C=1 ")]
            text = f"{kind} processor: auto >= {GOAL_CPU_BOUND}x C=1 (medians of {CPU_REPEATS})"
            out.append(timing.Goal(text, median_ratio(auto, one), GOAL_CPU_BOUND))
    if "server" in ran:
        figures = [c.server_cpu_us for c in starting(cells, "server ")]
        value = statistics.median(f for f in figures if f is not None) if figures else None
        text = f"server CPU per message at C={SERVER_CPU_CONCURRENCY}, L=100 ms"
        text += f" <= {GOAL_SERVER_CPU_US:g} us (median of {len(figures)})"
        out.append(timing.Goal(text, value, GOAL_SERVER_CPU_US, True, " us"))
    return out


def report(ctx: Context, ran: set[str], info: dict[str, Any], errors: list[str]) -> None:
    cells = ctx.cells
    print_cells(
        f"workers against a stub analyzer (L={LATENCY_S * 1000:g} ms; K={CAPACITY} where limited)",
        cells.values(),
    )
    for cell in starting(cells, "rate "):
        print(f"  {cell.label}: calls per 1 s window: {cell.windows}")
    for kind in ("noop", "rules"):  # what contention cannot hide: CPU per message
        cpu = [
            [c.worker_cpu_us or 0.0 for c in starting(cells, f"{kind} C={s} ")]
            for s in ("auto", "1")
        ]
        if all(cpu):
            auto, one = (statistics.median(side) for side in cpu)
            print(
                f"  {kind}: worker CPU per message, medians: auto {auto:.1f} us, C=1 {one:.1f} us"
            )
    for cell in starting(cells, "copies "):
        twice = sum(1 for n in cell.calls_per_key.values() if n > 1)
        print(
            f"  {cell.label}: {sum(cell.calls_per_key.values())} calls for "
            f"{len(cell.calls_per_key)} keys, {twice} keys called more than once"
        )
    print(f"\n  default SENTINEL_WORKER_CONCURRENCY of the workers: {ctx.default}")
    results = goals(cells, ran, ctx.default)
    timing.print_goals(results)
    for error in errors:
        print(f"  failed: {error}")
    timing.emit_json(
        NAME,
        {
            "default_concurrency": ctx.default,
            "cells": {k: cell_json(c) for k, c in cells.items()},
            "goals": {g.text: {"value": g.value, "verdict": g.verdict} for g in results},
            "errors": errors,
            "machine": info,
        },
    )


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


def main(argv: list[str] | None = None) -> int:
    parser = timing.base_parser(NAME, __doc__)
    parser.add_argument(
        "--only",
        default=",".join(SCENARIOS),
        help=f"comma-separated scenarios: {','.join(SCENARIOS)}",
    )
    args = parser.parse_args(argv)
    ran = set(args.only.split(","))
    unknown = ran - set(SCENARIOS)
    if unknown:
        parser.error(f"unknown scenarios: {sorted(unknown)}")
    errors: list[str] = []
    with timing.redis_server() as server, timing.scratch_dir("bench-limits-") as tmp:
        info = timing.machine_info(timing.raw_client(server.url))
        info["tree"] = tree_state()
        ctx = Context(server.url, tmp, "quick" if args.quick else "full")
        print(f"default SENTINEL_WORKER_CONCURRENCY: {ctx.default}; tree {info['tree']}")
        for name in (name for name in SCENARIOS if name in ran):
            print(f"== {name}", flush=True)
            with timing.part(name, errors):
                SCENARIOS[name](ctx)
        info["loadavg_1m_end"] = round(os.getloadavg()[0], 2)
        info["tree_end"] = tree_state()
        if info["tree_end"] != info["tree"]:  # a note, not a failure: the figures stand
            print(f"note: the working tree changed during the run: {info['tree_end']}")
    report(ctx, ran, info, errors)
    return 1 if errors else 0


if __name__ == "__main__":
    raise SystemExit(main())
