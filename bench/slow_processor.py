"""Slow processor: msg/s of one worker with in-worker concurrency against a slow analyzer.

A processor that waits on I/O (the analyzer call of ``SENTINEL_ANALYZER_URL``) leaves a
worker idle; ``SENTINEL_WORKER_CONCURRENCY`` lets one worker process have up to C messages
in progress at once, so its ceiling becomes C / L messages per second for an analyzer
answering in L seconds. Everything is real: one worker with its default processor (the
AML rules plus the analyzer), an :class:`AnalyzerStub` on 127.0.0.1 answering every
request after exactly L seconds, many at once, and the embedded redis-server. Each cell is
run and timed by :func:`bench.cells.run_cell`: msg/s is the distinct transactions with a
verdict over the time from the release to the last verdict (when the cell's time budget
runs out first, the rate over those done by then). ``answers/s`` counts the analyzer's
replies over the same window, a figure that does not depend on how the worker commits.
The worker reads with its default batch size unless ``--count`` says otherwise.

* **Matrix**: L in {100 ms, 2 s} x C in {1, 8, 32, 128}, ``SENTINEL_ANALYZER_TIMEOUT_S`` =
  max(5 s, 3 L). N = max(20, C / L x 6 s) (``--quick``, each cell stops after 8 s) or
  C / L x 20 s (full run, 40 s budget).
* **Analyzer down**, at C = 32: (a) refused (a closed port), (b) timing out (a stub that
  holds every request past ``SENTINEL_ANALYZER_TIMEOUT_S`` = 0.5 s), each against the same
  worker with no analyzer at all (rules only), measured in the same run: 30,000
  transactions each (150,000 in a full run), within the cell's time budget. The fallback
  to the rules must not make the worker much slower than the rules alone.

* **Against** (``--against REV``): the two goal cells three times each, this tree's worker
  and REV's alternating; the medians' ratio is a before/after of a change in one run.

Goals, printed with PASS/MISS: >= 0.8x C/L at L = 100 ms, C = 32; >= 0.9x C/L at L = 2 s,
C = 128; with the analyzer refusing or timing out, >= 0.8x the rules-only msg/s; 0
duplicate effects. A goal whose figure could not be measured (its part failed, or the
rules-only reference drained nothing) is a MISS. A part that fails is reported and the
others still run; the scenario then exits with status 1 after its figures.
"""

from __future__ import annotations

import itertools
import math
import statistics
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from bench import timing
from bench.cells import Cells, cell_json, print_cells, transactions
from sentinel_platform.redis_server import free_port

NAME = "slow_processor"
LATENCIES_S = (0.1, 2.0)
CONCURRENCIES = (1, 8, 32, 128)
DOWN_CONCURRENCY = 32
DOWN_TIMEOUT_S = 0.5
#: Ideal seconds of work per matrix cell (N = C / L x this) and the cell's time budget.
WINDOW_S = {"quick": 6.0, "full": 20.0}
BUDGET_S = {"quick": 8.0, "full": 40.0}
#: Transactions of each analyzer-down cell and of its rules-only reference.
#: Enough that the first calls' timeout (before any breaker opens) is not all that is timed.
DOWN_MESSAGES = {"quick": 30_000, "full": 150_000}
GOAL_CELLS = ((0.1, 32), (2.0, 128))
GOAL_FAST = 0.8  # L = 100 ms, C = 32
GOAL_SLOW = 0.9  # L = 2 s, C = 128
GOAL_DOWN = 0.8


class Run(Cells):
    """The cells of one run by label, each :func:`run_cell` on N fresh transactions."""

    def __init__(
        self, url: str, home: Path, mode: str, count: int | None, other: str | None = None
    ) -> None:
        super().__init__(url, home, BUDGET_S[mode])
        self.mode, self.other = mode, other
        self.read = {"read_count": count} if count else {}
        self.ideal: dict[str, float] = {}  # C / L of a matrix cell

    def cell(
        self, label: str, c: int, total: int, stub: Mapping[str, Any] | None = None, **settings: Any
    ) -> None:
        """``total`` transactions at C = ``c`` (``stub``: its :class:`AnalyzerStub`'s
        arguments; ``env_extra``: added to the worker's environment)."""
        env, messages = settings.pop("env_extra", None), list(transactions(total))
        settings = {**self.read, **settings}
        self.run(label, label, messages, str(c), stub, settings=settings, env_extra=env)

    def matrix(self) -> None:
        """Every cell of L x C."""
        for latency in LATENCIES_S:
            for c in CONCURRENCIES:
                label = f"L={latency:g}s C={c}"
                self.ideal[label] = c / latency
                total = max(20, math.ceil(c / latency * WINDOW_S[self.mode]))
                timeout = max(5.0, 3 * latency)
                self.cell(label, c, total, {"latency_s": latency}, analyzer_timeout_s=timeout)

    def against(self) -> None:
        """The goal cells of this tree and of :attr:`other`, alternating, three times."""
        assert self.other is not None
        for latency, c in GOAL_CELLS:
            total = max(20, math.ceil(c / latency * WINDOW_S[self.mode]))
            for n, tree in itertools.product(range(3), ("ours", self.other)):
                label = f"L={latency:g}s C={c} {tree} #{n + 1}"
                env = timing.tree_env(self.home / tree) if tree != "ours" else None
                self.ideal[label] = c / latency
                stub, timeout = {"latency_s": latency}, max(5.0, 3 * latency)
                self.cell(label, c, total, stub, env_extra=env, analyzer_timeout_s=timeout)

    def down(self) -> None:
        """Rules only, analyzer refusing, analyzer timing out: the same worker at C = 32."""
        c, total = DOWN_CONCURRENCY, DOWN_MESSAGES[self.mode]
        self.cell("rules only", c, total)
        refused = f"http://127.0.0.1:{free_port()}/assess"  # nobody listens there
        self.cell("refused", c, total, analyzer_url=refused, analyzer_timeout_s=DOWN_TIMEOUT_S)
        hanging = {"latency_s": 4 * DOWN_TIMEOUT_S, "hang": True}
        self.cell("timing out", c, total, hanging, analyzer_timeout_s=DOWN_TIMEOUT_S)


def report(run: Run, info: dict[str, Any], parts: set[str], errors: list[str]) -> None:
    batch = f"read count {run.read['read_count']}" if run.read else "default read count"
    print_cells(
        f"one worker per cell, analyzer of latency L, C in flight ({batch})", run.cells.values()
    )
    rules_rate = run.cells["rules only"].msgs_per_s if "rules only" in run.cells else None
    figures = {
        label: {
            "answers/s": round(cell.stub.get("answered", 0) / cell.seconds, 1),
            "ideal C/L": run.ideal.get(label),
            "x ideal": timing.ratio(cell.msgs_per_s, run.ideal.get(label)),
            "x rules only": timing.ratio(
                cell.msgs_per_s, None if label in run.ideal else rules_rate
            ),
        }
        for label, cell in run.cells.items()
    }
    timing.print_table(
        "against the ideal C / L and against the rules alone",
        ["cell", *next(iter(figures.values()), {})],
        [[label, *row.values()] for label, row in figures.items()],
    )
    # Every goal of a part that ran; a figure it could not measure (a failed part, a rules
    # reference that drained nothing) is a MISS, not a line left out of the summary.
    goals: list[timing.Goal] = []
    if "matrix" in parts:
        for shown, label, goal in (
            ("100 ms", "L=0.1s C=32", GOAL_FAST),
            ("2 s", "L=2s C=128", GOAL_SLOW),
        ):
            value = figures.get(label, {}).get("x ideal")
            goals.append(timing.Goal(f"L={shown}, {label.split()[1]}: >= {goal}x C/L", value, goal))
    if "down" in parts:
        for label, text in (("refused", "refusing"), ("timing out", "timing out")):
            value = figures.get(label, {}).get("x rules only")
            text = f"analyzer {text}, C={DOWN_CONCURRENCY}: >= {GOAL_DOWN}x rules only"
            goals.append(timing.Goal(text, value, GOAL_DOWN))
    if "against" in parts and run.other is not None:
        for latency, c in GOAL_CELLS:
            medians = [
                statistics.median(
                    figures[k]["x ideal"] or 0.0
                    for k in figures
                    if k.startswith(f"L={latency:g}s C={c} {tree} ")
                )
                for tree in ("ours", run.other)
            ]
            print(
                f"  L={latency:g}s C={c}: x C/L median ours {medians[0]}, {run.other} "
                f"{medians[1]}: ours / {run.other} = {timing.ratio(*medians)}"
            )
    duplicates = sum(c.duplicates for c in run.cells.values())
    goals.append(timing.Goal("0 duplicate effects", duplicates, 0, at_most=True, unit=""))
    verdicts = timing.print_goals(goals)
    for error in errors:
        print(f"  failed: {error}")
    cells = {k: {**cell_json(c), **figures[k]} for k, c in run.cells.items()}
    timing.emit_json(
        NAME,
        {"read_count": run.read.get("read_count"), "cells": cells, "goals": verdicts}
        | {"duplicate_effects": duplicates, "errors": errors, "machine": info},
    )


def main(argv: list[str] | None = None) -> int:
    parser = timing.base_parser(NAME, __doc__)
    parser.add_argument(
        "--count", type=int, default=None, help="the worker's batch size (default: its default)"
    )
    parser.add_argument("--only", default="matrix,down", help="comma-separated parts: matrix,down")
    parser.add_argument("--against", help="the goal cells of this commit too, alternating")
    args = parser.parse_args(argv)
    parts = {"against"} if args.against else set(args.only.split(","))
    errors: list[str] = []  # a part that fails leaves the others' figures
    with (
        timing.redis_server() as server,
        timing.scratch_dir("bench-slow-") as tmp,
        timing.checkout(tmp, args.against) as other,
    ):
        info = timing.machine_info(timing.raw_client(server.url))
        run = Run(server.url, tmp, "quick" if args.quick else "full", args.count, other)
        for name, measure in (("matrix", run.matrix), ("down", run.down), ("against", run.against)):
            if name in parts:
                with timing.part(name, errors):
                    measure()
    report(run, info, parts, errors)
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
