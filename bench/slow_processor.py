"""Slow processor: msg/s of one worker with in-worker concurrency against a slow analyzer.

A processor that waits on I/O (the analyzer call of ``SENTINEL_ANALYZER_URL``) leaves a
worker idle; ``SENTINEL_WORKER_CONCURRENCY`` / ``--concurrency C`` lets one worker process
have up to C messages in progress at once, so its ceiling becomes C / L messages per
second for an analyzer answering in L seconds. Everything here is real: one
``python -m workers.watch_transactions --concurrency C`` process with its default
processor (the AML rules plus the analyzer), an HTTP analyzer on 127.0.0.1
(:class:`AnalyzerStub`, a ``ThreadingHTTPServer`` answering every request after exactly
L seconds, many at once, counting the requests in flight), the embedded redis-server.

Each cell, timed like ``worker_throughput.py``: N valid transactions are in the stream
with the group parked at its end; the worker starts and takes its lease; then one
``MULTI`` moves the group back to ``0``, adds the last transaction and reads the
server's ``TIME``. msg/s is the number of verdicts (distinct ``txn_id`` in
``sentinel:verdicts``) over the time from that release to the last verdict's stream id
(server clock): when the cell's time budget runs out first, the rate over the messages
completed by then (over the whole budget when none was). ``answers/s`` counts the
analyzer's replies (until all verdicts are in or the budget ends) over the same window, a
figure that does not depend on how the worker commits. A duplicate effect is a second
verdict for one transaction id (the figure must be 0). The worker reads with its default
batch size (``SENTINEL_READ_COUNT``) unless ``--count`` says otherwise.

* **Matrix**: L in {100 ms, 2 s} x C in {1, 8, 32, 128}, ``SENTINEL_ANALYZER_TIMEOUT_S`` =
  max(5 s, 3 L). N = max(20, C / L x 6 s) (``--quick``, each cell stops after 8 s) or
  C / L x 20 s (full run, 40 s budget).
* **Analyzer down**, at C = 32: (a) refused (a closed port), (b) timing out (a stub that
  holds every request past ``SENTINEL_ANALYZER_TIMEOUT_S`` = 0.5 s), each against the same
  worker with no analyzer at all (rules only), measured in the same run: 30,000
  transactions each (150,000 in a full run), within the cell's time budget. The fallback
  to the rules must not make the worker much slower than the rules alone.
* **No-op A/B**: the no-op worker (the harness's ``noop`` processor, default
  concurrency) of this working tree (A) against the previous commit's (B, ``git worktree
  add`` of ``--prev``, default ``HEAD``, into a temporary directory removed at the end; its
  worker runs with that directory as working directory and ``PYTHONPATH``), timed exactly
  as ``worker_throughput.py`` times ``ours x1``, alternating A and B.

Goals, printed with PASS/MISS: >= 0.8x C/L at L = 100 ms, C = 32; >= 0.9x C/L at L = 2 s,
C = 128; with the analyzer refusing or timing out, >= 0.8x the rules-only msg/s; no-op A
>= 0.95x the median of B; 0 duplicate effects. A goal whose figure could not be measured
(its part failed, or the rules-only reference drained nothing) is a MISS. A part that
fails (a worker that never drains) is reported and the others still run; the script then
exits with status 1 after its figures and JSON line.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import contextlib
import json
import math
import os
import statistics
import subprocess
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any, cast

import redis

from bench._common import (
    base_parser,
    bench_settings,
    emit_json,
    machine_info,
    print_table,
    ratio,
    raw_client,
    redis_server,
    scratch_dir,
)
from bench.worker_throughput import _cpu_seconds, _prepare, _release_and_time
from sentinel_platform.redis_server import free_port
from sentinel_platform.streams.plumbing.keys import StreamKeys, transaction_keys
from sentinel_platform_tests.harness.analyzer_stub import AnalyzerStub
from sentinel_platform_tests.harness.processes import (
    NOOP_PROCESSOR,
    PYTHON,
    Child,
    Fleet,
    WorkerProcess,
    child_env,
    wait_leases,
)
from sentinel_platform_tests.harness.streams import fill_stream
from sentinel_platform_tests.harness.waits import WaitTimeout

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
NOOP_MESSAGES = {"quick": 15_000, "full": 30_000}
AB_REPEATS = {"quick": 3, "full": 5}
GOAL_FAST = 0.8  # L = 100 ms, C = 32
GOAL_SLOW = 0.9  # L = 2 s, C = 128
GOAL_DOWN = 0.8
GOAL_NOOP = 0.95
TRANSACTION = {
    "merchant": "ACME Corp",
    "category": "retail",
    "currency": "EUR",
    "amount": 123.45,
    "message": "bench",
    "source": "bench",
    "timestamp": "2026-01-01T00:00:00Z",
}


# --- one cell: one worker draining N transactions --------------------------------------------


@dataclass(frozen=True)
class Cell:
    """The figures of one worker run."""

    label: str
    latency_s: float | None
    concurrency: int
    messages: int
    done: int
    seconds: float
    msgs_per_s: float
    answers_per_s: float | None
    ideal: float | None
    peak_in_flight: int | None
    analyzer_calls: int | None
    connections: int | None
    duplicate_effects: int
    worker_errors: int
    first_error: str | None

    @property
    def vs_ideal(self) -> float | None:
        return ratio(self.msgs_per_s, self.ideal)


def transactions(count: int, start: int = 0) -> Iterator[dict[str, str]]:
    """Valid transactions in the wire format (one field ``data``), ids ``t<index>``."""
    for index in range(start, start + count):
        yield {"data": json.dumps({**TRANSACTION, "id": f"t{index}"}, separators=(",", ":"))}


def _server_ms(client: redis.Redis) -> float:
    seconds, micros = client.time()
    return seconds * 1000 + micros / 1000


def _release(client: redis.Redis, keys: StreamKeys, total: int) -> float:
    """Make every transaction readable at once; the server's clock at that moment (ms)."""
    pipe = client.pipeline(transaction=True)
    pipe.xgroup_setid(keys.stream, keys.group, "0", entries_read=0)
    last: dict[Any, Any] = next(transactions(1, total - 1))
    pipe.xadd(keys.stream, last)
    pipe.time()
    seconds, micros = pipe.execute()[-1]
    return float(seconds * 1000 + micros / 1000)


def _verdicts(client: redis.Redis, keys: StreamKeys) -> list[tuple[str, dict[str, str]]]:
    return cast(Any, client.xrange(keys.results))


def run_cell(
    label: str,
    url: str,
    home: Path,
    *,
    concurrency: int,
    total: int,
    budget_s: float,
    count: int | None,
    stub: AnalyzerStub | None = None,
    analyzer_url: str | None = None,
    timeout_s: float | None = None,
    latency_s: float | None = None,
) -> Cell:
    """One worker, ``total`` transactions, until all have verdicts or ``budget_s`` is up."""
    client = raw_client(url)
    keys = transaction_keys(bench_settings(url, home))
    client.flushdb()
    fill_stream(client, keys.stream, transactions(total - 1))
    client.xgroup_create(keys.stream, keys.group, id="$")
    settings: dict[str, Any] = {"lag_key_ttl_s": 10}
    if analyzer_url is not None:
        settings.update(analyzer_url=analyzer_url, analyzer_timeout_s=timeout_s)
    env = child_env(url, home, **settings)
    with Fleet(home) as fleet:
        worker = fleet.worker(
            "transactions",
            f"slow-{label}".replace(" ", "-").replace("/", "-"),
            env,
            count=count,
            extra=["--concurrency", str(concurrency)],
        )
        wait_leases(client, keys, [worker])
        before = stub.counters() if stub else None
        started_ms = _release(client, keys, total)
        deadline = time.monotonic() + budget_s
        while client.xlen(keys.results) < total and time.monotonic() < deadline:
            if not worker.alive():
                raise RuntimeError(f"worker exited:\n{worker.log_tail()}")
            time.sleep(0.02)
        stopped_ms = _server_ms(client)
        after = stub.counters() if stub else None
        verdicts = _verdicts(client, keys)
        worker.stop(timeout_s=3)
        errors, first_error = worker_errors(worker)
    done = len({fields["txn_id"] for _, fields in verdicts})
    # Duplicates also after the stop: a message finished twice while the worker stopped.
    per_txn = Counter(fields["txn_id"] for _, fields in _verdicts(client, keys))
    if done:
        stopped_ms = max(int(entry_id.split("-", 1)[0]) for entry_id, _ in verdicts)
    seconds = max(stopped_ms - started_ms, 1.0) / 1000
    answers = None
    if before is not None and after is not None:
        answers = (after["answered"] - before["answered"]) / seconds
    return Cell(
        label=label,
        latency_s=latency_s,
        concurrency=concurrency,
        messages=total,
        done=done,
        seconds=round(seconds, 3),
        msgs_per_s=done / seconds,
        answers_per_s=answers,
        ideal=concurrency / latency_s if latency_s else None,
        peak_in_flight=after["peak_in_flight"] if after else None,
        analyzer_calls=after["calls"] if after else None,
        connections=after["connections"] if after else None,
        duplicate_effects=sum(n - 1 for n in per_txn.values()),
        worker_errors=errors,
        first_error=first_error,
    )


def worker_errors(worker: Child) -> tuple[int, str | None]:
    """How many error lines the worker logged, and the first one's error (shortened)."""
    count, first = 0, None
    for line in worker.log_text().splitlines():
        if not line.startswith("{"):
            continue
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if entry.get("level") in ("error", "critical"):
                count += 1
                first = first or str(entry.get("error") or entry.get("event"))[:160]
    return count, first


def matrix(url: str, home: Path, mode: str, count: int | None, cells: list[Cell]) -> None:
    """Every cell of L x C, appended to ``cells`` as it is measured."""
    for latency in LATENCIES_S:
        for concurrency in CONCURRENCIES:
            total = max(20, math.ceil(concurrency / latency * WINDOW_S[mode]))
            label = f"L={latency:g}s C={concurrency}"
            with AnalyzerStub(latency) as stub:
                cell = run_cell(
                    label,
                    url,
                    home,
                    concurrency=concurrency,
                    total=total,
                    budget_s=BUDGET_S[mode],
                    count=count,
                    stub=stub,
                    analyzer_url=stub.url,
                    timeout_s=max(5.0, 3 * latency),
                    latency_s=latency,
                )
            cells.append(cell)
            _progress(cell)


def analyzer_down(
    url: str, home: Path, mode: str, count: int | None, cells: dict[str, Cell]
) -> None:
    """Rules only, analyzer refusing, analyzer timing out: the same worker at C = 32."""
    common: dict[str, Any] = {
        "concurrency": DOWN_CONCURRENCY,
        "total": DOWN_MESSAGES[mode],
        "budget_s": BUDGET_S[mode],
        "count": count,
    }
    cells["rules"] = run_cell("rules only", url, home, **common)
    _progress(cells["rules"])
    refused = f"http://127.0.0.1:{free_port()}/assess"  # nobody listens there
    cells["refused"] = run_cell(
        "refused", url, home, analyzer_url=refused, timeout_s=DOWN_TIMEOUT_S, **common
    )
    _progress(cells["refused"])
    with AnalyzerStub(4 * DOWN_TIMEOUT_S, hang=True) as stub:
        cells["timeout"] = run_cell(
            "timing out",
            url,
            home,
            stub=stub,
            analyzer_url=stub.url,
            timeout_s=DOWN_TIMEOUT_S,
            **common,
        )
    _progress(cells["timeout"])


def _progress(cell: Cell) -> None:
    print(
        f"  {cell.label:<14} {cell.done:>6,}/{cell.messages:<6,} in {cell.seconds:6.2f} s"
        f"  {cell.msgs_per_s:>9,.1f} msg/s  peak in flight {cell.peak_in_flight}"
        f"  worker errors {cell.worker_errors}"
        + (f" (first: {cell.first_error})" if cell.first_error else ""),
        flush=True,
    )


# --- no-op A/B against the previous commit -------------------------------------------------


@contextlib.contextmanager
def previous_tree(rev: str) -> Iterator[tuple[Path, str]]:
    """A ``git worktree`` of ``rev`` in a temporary directory, removed on exit."""
    repo = Path(__file__).resolve().parent.parent
    commit = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--short", rev],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    path = Path(tempfile.mkdtemp(prefix="bench-prev-"))
    git = ["git", "-C", str(repo), "worktree"]
    subprocess.run([*git, "add", "--detach", str(path), commit], check=True, capture_output=True)
    try:
        yield path, commit
    finally:
        subprocess.run([*git, "remove", "--force", str(path)], check=False, capture_output=True)


def _tree_env(env: dict[str, str], tree: Path) -> dict[str, str]:
    """``env`` with ``tree`` first on the import path (the editable install comes last)."""
    paths = [str(tree), *(p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p)]
    repo = str(Path(__file__).resolve().parent.parent)
    return {**env, "PYTHONPATH": os.pathsep.join(p for p in paths if p != repo)}


def _noop_processor_of(tree: Path) -> str:
    """The no-op processor of ``tree``: the harness's, or the bench's before the harness
    (that one reads the natural key from a field ``k``)."""
    harness = tree / "sentinel_platform_tests" / "harness" / "processors.py"
    return NOOP_PROCESSOR if harness.exists() else "bench.processors:noop"


def _legacy(tree: Path) -> bool:
    return _noop_processor_of(tree) != NOOP_PROCESSOR


def _check_imports_from(tree: Path, env: dict[str, str]) -> None:
    """Fail unless a worker started in ``tree`` imports the code of ``tree``."""
    module = _noop_processor_of(tree).partition(":")[0]
    # Modules every commit has: the processor, the entry point started, the platform.
    probe = (
        f"import {module} as b, workers.watch_transactions as w, sentinel_platform as s\n"
        "print(b.__file__, s.__file__, w.__file__, sep='\\n')"
    )
    found = subprocess.run(
        [PYTHON, "-c", probe], cwd=tree, env=env, check=True, capture_output=True, text=True
    ).stdout.splitlines()
    for where in found:
        if not Path(where).resolve().is_relative_to(tree.resolve()):
            raise RuntimeError(f"the previous commit's worker would import {where}, not {tree}")


def _spawn_in(fleet: Fleet, tree: Path, name: str, env: dict[str, str]) -> WorkerProcess:
    """The no-op worker run from ``tree`` (``python -m`` puts its working directory first),
    through the ``workers.watch_transactions`` entry point every commit has."""
    argv = [PYTHON, "-m", "workers.watch_transactions", "--consumer", name]
    argv += ["--log-level", "INFO", "--processor", _noop_processor_of(tree)]
    log_path = fleet.log_dir / f"{name}.log"
    with log_path.open("ab") as log:
        process = subprocess.Popen(
            argv, env=env, cwd=tree, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT
        )
    return fleet.adopt(WorkerProcess(process, name, None, log_path, env))


def noop_run(
    url: str, home: Path, total: int, tree: Path | None, name: str, legacy: bool = False
) -> tuple[float, float | None]:
    """msg/s of one no-op worker (this tree's, or ``tree``'s) draining ``total`` messages,
    and the worker's CPU microseconds per message (what contention cannot hide)."""
    client = raw_client(url)
    keys = transaction_keys(bench_settings(url, home))
    _prepare(client, keys, total, legacy)
    env = child_env(url, home, lag_key_ttl_s=10)
    with Fleet(home) as fleet:
        if tree is None:
            worker = fleet.worker("transactions", name, env, NOOP_PROCESSOR)
        else:
            worker = _spawn_in(fleet, tree, name, _tree_env(env, tree))
        wait_leases(client, keys, [worker])
        cpu_before = _cpu_seconds(worker.pid)
        try:
            seconds = _release_and_time(
                client, keys, total, timeout_s=max(30, total / 500), legacy=legacy
            )
        except WaitTimeout as exc:
            count, first = worker_errors(worker)
            raise WaitTimeout(f"{exc}; worker {name}: {count} errors, first: {first}") from None
        cpu_after = _cpu_seconds(worker.pid)
        worker.stop()
    cpu_us = None
    if cpu_before is not None and cpu_after is not None:
        cpu_us = (cpu_after - cpu_before) / total * 1e6
    return total / seconds, cpu_us


def noop_ab(url: str, home: Path, mode: str, rev: str) -> dict[str, Any]:
    runs: dict[str, list[float]] = {"A": [], "B": []}
    cpu: dict[str, list[float]] = {"A": [], "B": []}
    total = NOOP_MESSAGES[mode]
    with previous_tree(rev) as (tree, commit):
        _check_imports_from(tree, _tree_env(child_env(url, home), tree))
        for repeat in range(AB_REPEATS[mode]):  # interleaved: drift hits both alike
            for side, where in (("A", None), ("B", tree)):
                name = f"noop-{side}-{repeat}"
                rate, cpu_us = noop_run(url, home, total, where, name, _legacy(tree))
                runs[side].append(rate)
                if cpu_us is not None:
                    cpu[side].append(cpu_us)
                print(
                    f"  run {repeat + 1} {side} ({'tree' if where is None else commit})"
                    f" {rate:>10,.0f} msg/s  worker cpu {cpu_us or float('nan'):.1f} us/msg",
                    flush=True,
                )
    median = {side: statistics.median(values) for side, values in runs.items()}
    cpu_median = {side: statistics.median(v) if v else None for side, v in cpu.items()}
    return {
        "previous_commit": commit,
        "messages": total,
        "runs": {side: [round(v) for v in values] for side, values in runs.items()},
        "median": {side: round(v) for side, v in median.items()},
        "ratio": ratio(median["A"], median["B"]),
        "cpu_us_per_msg": {k: None if v is None else round(v, 1) for k, v in cpu_median.items()},
        # B's CPU per message over A's: the throughput ratio a saturated machine would show.
        "cpu_ratio": ratio(cpu_median["B"], cpu_median["A"]),
    }


# --- report ----------------------------------------------------------------------------------


def _verdict(value: float | None, goal: float) -> str:
    return "PASS" if value is not None and value >= goal else "MISS"


def _find(cells: list[Cell], latency: float, concurrency: int) -> Cell | None:
    return next((c for c in cells if c.latency_s == latency and c.concurrency == concurrency), None)


def report(
    cells: list[Cell],
    down: dict[str, Cell],
    ab: dict[str, Any] | None,
    count: int | None,
    info: dict[str, Any],
    parts: set[str],
    errors: list[str],
) -> None:
    batch = f"--count {count}" if count else "default read count"
    if cells:
        print_table(
            f"one worker, analyzer of fixed latency L, --concurrency C ({batch})",
            [
                "cell",
                "done",
                "s",
                "msg/s",
                "answers/s",
                "ideal C/L",
                "ratio",
                "peak in flight",
                "connections",
                "dup effects",
                "worker errors",
            ],
            [
                (
                    c.label,
                    f"{c.done}/{c.messages}",
                    c.seconds,
                    c.msgs_per_s,
                    c.answers_per_s,
                    c.ideal,
                    c.vs_ideal,
                    c.peak_in_flight,
                    c.connections,
                    c.duplicate_effects,
                    c.worker_errors,
                )
                for c in cells
            ],
        )
    rules = down.get("rules")
    if down:
        print_table(
            f"analyzer down, C={DOWN_CONCURRENCY}, timeout {DOWN_TIMEOUT_S} s ({batch})",
            [
                "cell",
                "done",
                "s",
                "msg/s",
                "x rules only",
                "analyzer calls",
                "dup effects",
                "errors",
            ],
            [
                (
                    c.label,
                    f"{c.done}/{c.messages}",
                    c.seconds,
                    c.msgs_per_s,
                    ratio(c.msgs_per_s, rules.msgs_per_s if rules else None),
                    c.analyzer_calls,
                    c.duplicate_effects,
                    c.worker_errors,
                )
                for c in down.values()
            ],
        )
    if ab:
        print_table(
            f"no-op worker, default concurrency, {ab['messages']:,} messages: this tree (A) "
            f"vs {ab['previous_commit']} (B)",
            ["side", "runs msg/s", "median msg/s", "worker cpu us/msg"],
            [
                (
                    side,
                    ", ".join(f"{v:,}" for v in ab["runs"][side]),
                    ab["median"][side],
                    ab["cpu_us_per_msg"][side],
                )
                for side in ("A", "B")
            ],
        )
        print(f"  cpu: B / A per message = {ab['cpu_ratio']} (1.0 = the same work)")
    # Every goal of a part that ran; a figure it could not measure (a failed part, a rules
    # reference that drained nothing) is a MISS, not a line left out of the summary.
    goals: dict[str, tuple[float | None, float]] = {}
    if "matrix" in parts:
        fast, slow = _find(cells, 0.1, 32), _find(cells, 2.0, 128)
        goals[f"L=100 ms, C=32: >= {GOAL_FAST}x C/L"] = (fast.vs_ideal if fast else None, GOAL_FAST)
        goals[f"L=2 s, C=128: >= {GOAL_SLOW}x C/L"] = (slow.vs_ideal if slow else None, GOAL_SLOW)
    if "down" in parts:
        for key, text in (("refused", "refusing"), ("timeout", "timing out")):
            cell = down.get(key)
            value = ratio(cell.msgs_per_s, rules.msgs_per_s) if cell and rules else None
            goals[f"analyzer {text}, C={DOWN_CONCURRENCY}: >= {GOAL_DOWN}x rules only"] = (
                value,
                GOAL_DOWN,
            )
    if "ab" in parts:
        goals[f"no-op worker >= {GOAL_NOOP}x previous commit's median"] = (
            ab["ratio"] if ab else None,
            GOAL_NOOP,
        )
    duplicates = sum(c.duplicate_effects for c in [*cells, *down.values()])
    print()
    for text, (value, goal) in goals.items():
        shown = "not measured" if value is None else f"{value}x"
        print(f"  {_verdict(value, goal):<4}  {text}: {shown}")
    print(f"  {'PASS' if duplicates == 0 else 'MISS'}  0 duplicate effects: {duplicates}")
    for error in errors:
        print(f"  failed: {error}")
    emit_json(
        NAME,
        {
            "read_count": count,
            "matrix": [{**asdict(c), "vs_ideal": c.vs_ideal} for c in cells],
            "analyzer_down": {
                k: {
                    **asdict(c),
                    "vs_rules": ratio(c.msgs_per_s, rules.msgs_per_s if rules else None),
                }
                for k, c in down.items()
            },
            "noop_ab": ab,
            "duplicate_effects": duplicates,
            "goals": {text: _verdict(value, goal) for text, (value, goal) in goals.items()},
            "errors": errors,
            "machine": info,
        },
    )


def main() -> int:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument(
        "--count", type=int, default=None, help="the worker's batch size (default: its default)"
    )
    parser.add_argument(
        "--only", default="matrix,down,ab", help="comma-separated parts: matrix,down,ab"
    )
    parser.add_argument("--prev", default="HEAD", help="the commit of the A/B's side B")
    args = parser.parse_args()
    mode = "quick" if args.quick else "full"
    parts = set(args.only.split(","))
    cells: list[Cell] = []
    down: dict[str, Cell] = {}
    ab: dict[str, Any] | None = None
    with redis_server() as server, scratch_dir("bench-slow-") as tmp:
        info = machine_info(raw_client(server.url))
        # A part that fails (a worker that never drains) leaves the others' figures.
        errors: list[str] = []
        if "matrix" in parts:
            with _part("matrix", errors):
                matrix(server.url, tmp, mode, args.count, cells)
        if "down" in parts:
            with _part("down", errors):
                analyzer_down(server.url, tmp, mode, args.count, down)
        if "ab" in parts:
            with _part("ab", errors):
                ab = noop_ab(server.url, tmp, mode, args.prev)
    report(cells, down, ab, args.count, info, parts, errors)
    return 1 if errors else 0


@contextlib.contextmanager
def _part(name: str, errors: list[str]) -> Iterator[None]:
    """Run one part of the bench; a failure is recorded in ``errors`` and reported."""
    try:
        yield
    except (WaitTimeout, RuntimeError, subprocess.CalledProcessError) as exc:
        errors.append(f"{name}: {exc}")
        print(f"  {name} failed: {exc}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
