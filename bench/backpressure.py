"""Backpressure: lag band, consumer idle time and producer rate of the publish guard.

Producers much faster than the consumers (worker processes with a fixed service time per
message, ``--simulate-latency-ms``) publish for a fixed time. Runs, each against fresh
workers and a fresh stream on one server:

* ``ours``: :func:`sentinel_platform.streams.producer.publish.publish_rows` with
  :class:`~sentinel_platform.streams.producer.backpressure.BackpressureGuard`, batches of
  ``SENTINEL_PUBLISH_BATCH_SIZE``: the path the Spark assets publish through;
* ``ours x2``: two producer processes publishing at once (two partitions);
* ``ours halves``: the consumers' speed halves mid-run (every message then takes twice the
  service time: :class:`SlowingProcessor`, switched by a key).

Producers start together on a signal, so every figure covers the same window. The true
lag (backlog + pending) is sampled every 100 ms; the band statistics start when it first
reaches ``lag_warn`` (the start-up fill is not steady state). Consumer idle fraction is
the share of samples with nothing left to deliver (backlog 0): it depends on the producer
alone, not on how busy the machine is. The lag over time is drawn to
``bench/out/backpressure.png`` (``--png``; untracked) when matplotlib (the ``bench``
extra) is installed, else skipped with a note. Targets (each run): band p95-p5 <= 25% of
``lag_pause``, max <= ``lag_pause``, consumers idle < 5%, producer rate >= 95% of the
consumed rate; each printed PASS/MISS.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import redis

from bench.timing import (
    base_parser,
    bench_settings,
    distribution,
    emit_json,
    machine_info,
    print_table,
    raw_client,
    redis_server,
    scratch_dir,
)
from sentinel_platform.settings import Settings, load_settings
from sentinel_platform.streams.consumer.processor import Effect
from sentinel_platform.streams.plumbing.keys import StreamKeys, transaction_keys
from sentinel_platform.streams.producer.backpressure import (
    BackpressureGuard,
    PublishInterrupted,
)
from sentinel_platform.streams.producer.pacing_limits import BackpressureConfig
from sentinel_platform.streams.producer.publish import publish_rows
from sentinel_platform_tests.harness.processes import (
    PYTHON,
    REPO_ROOT,
    Fleet,
    child_env,
    wait_leases,
)
from sentinel_platform_tests.harness.processors import NoopProcessor
from sentinel_platform_tests.harness.streams import unacked
from sentinel_platform_tests.harness.waits import wait_until

#: The guard paces by message counts here, Sentinel-L7's numbers, so every run shares
#: one scale (by default the limits are seconds of work, docs/backpressure.md).
COUNT_LIMITS = {"lag_warn": 50, "lag_pause": 200}

NAME = "backpressure"
PNG = REPO_ROOT / "bench" / "out" / "backpressure.png"
SAMPLE_S = 0.1
GO_KEY, READY_KEY, SLOW_KEY = "bench:bp:go", "bench:bp:ready", "bench:bp:slow"


@dataclass(frozen=True)
class Run:
    name: str
    producers: int = 1
    halves: bool = False


RUNS = (Run("ours"), Run("ours x2", producers=2), Run("ours halves", halves=True))
TARGETS = (
    ("band <= 25% pause", lambda f, s: f["band"] <= 0.25 * s.lag_pause),
    ("max <= pause", lambda f, s: f["lag"]["max"] <= s.lag_pause),
    ("idle < 5%", lambda f, s: f["idle_fraction"] < 0.05),
    ("producer >= 95% consumed", lambda f, s: f["producer_vs_consumed"] >= 0.95),
)


# --- producers (run as a child process via --role-producer) --------------------------------


class SlowingProcessor(NoopProcessor):
    """Adds ``SENTINEL_SIMULATE_LATENCY_MS`` again per message once ``SLOW_KEY`` is set."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._client = redis.Redis.from_url(settings.redis_url_value)
        self._checked = 0.0
        self._slow = False

    def process(self, message: dict[str, str]) -> Effect:
        now = time.monotonic()
        if now - self._checked > 0.2:
            self._checked, self._slow = now, bool(self._client.exists(SLOW_KEY))
        if self._slow:
            time.sleep((self._settings.simulate_latency_ms or 0) / 1000)
        return super().process(message)


def producer_main(args: argparse.Namespace) -> int:
    """One producer: publish through the guard from the common start for ``--seconds``;
    prints how many messages it handed to the publish path."""
    settings = load_settings()
    keys = transaction_keys(settings)
    client = redis.Redis.from_url(settings.redis_url_value, decode_responses=True)
    client.incr(READY_KEY)
    while not client.exists(GO_KEY):
        time.sleep(0.005)
    started = time.monotonic()
    sent = 0

    def stop() -> bool:
        return time.monotonic() > started + args.seconds

    def entries() -> Iterator[dict[str, str]]:
        nonlocal sent
        while not stop():
            sent += 1
            yield {"key": f"ours-{args.producer_id}-{sent - 1}", "data": "x" * 200}

    guard = BackpressureGuard(client, keys, BackpressureConfig.from_settings(settings), stop)
    with contextlib.suppress(PublishInterrupted):  # the deadline ended a wait
        publish_rows(client, keys, entries(), settings.publish_batch_size, guard)
    print(json.dumps({"sent": sent, "seconds": time.monotonic() - started}), flush=True)
    return 0


# --- the measurement ---------------------------------------------------------------------


@dataclass
class Trace:
    run: Run
    times: list[float] = field(default_factory=list)
    lags: list[int] = field(default_factory=list)
    backlogs: list[int] = field(default_factory=list)
    sent: int = 0
    processed: int = 0
    seconds: float = 0.0


def _sample(client: redis.Redis, keys: StreamKeys, trace: Trace, done: threading.Event) -> None:
    """Every :data:`SAMPLE_S` until ``done``: the group's lag (never delivered + pending)
    and its backlog (never delivered)."""
    started = time.monotonic()
    while not done.is_set():
        groups = client.xinfo_groups(keys.stream)
        pending = next(int(g["pending"]) for g in groups if g["name"] == keys.group)
        lag = unacked(client, keys.stream, keys.group)
        trace.times.append(time.monotonic() - started)
        trace.lags.append(lag)
        trace.backlogs.append(lag - pending)
        done.wait(SAMPLE_S)


def run_one(run: Run, url: str, tmp: Path, args: argparse.Namespace) -> Trace:
    tag = run.name.replace(" ", "-")
    home = tmp / tag
    overrides: dict[str, Any] = {"transactions_stream": f"bench:bp:{tag}", **COUNT_LIMITS}
    keys = transaction_keys(bench_settings(url, home, **overrides))
    client = raw_client(url)
    client.delete(GO_KEY, READY_KEY, SLOW_KEY)
    env = child_env(url, home, **overrides)
    trace = Trace(run)
    with Fleet(tmp) as fleet:
        workers = [
            fleet.worker(
                "transactions",
                f"bp-{tag}-{i}",
                env,
                "bench.backpressure:SlowingProcessor",
                count=args.worker_count,
                simulate_latency_ms=args.service_ms,
            )
            for i in range(args.workers)
        ]
        wait_leases(client, keys, workers)
        role = [PYTHON, "-m", "bench.backpressure", "--role-producer"]
        role += ["--seconds", str(args.seconds)]
        producers = [
            fleet.spawn(f"producer-{tag}-{i}", [*role, "--producer-id", str(i)], env)
            for i in range(run.producers)
        ]
        wait_until(lambda: int(client.get(READY_KEY) or 0) == run.producers, 60, 0.02, "ready")
        done = threading.Event()
        sampler = threading.Thread(target=_sample, args=(client.client(), keys, trace, done))
        before = int(client.xlen(keys.results))
        client.set(GO_KEY, "1")
        started = time.monotonic()
        sampler.start()
        time.sleep(args.seconds / 2)
        if run.halves:  # the consumers' speed halves mid-run
            client.set(SLOW_KEY, "1")
        time.sleep(args.seconds / 2)
        trace.processed = int(client.xlen(keys.results)) - before
        trace.seconds = time.monotonic() - started
        done.set()
        sampler.join()
        wait_until(lambda: not any(p.alive() for p in producers), 30, 0.02, "producers exit")
        for producer in producers:
            report = json.loads(producer.log_text().strip().splitlines()[-1])
            trace.sent += int(report["sent"])
        for worker in workers:
            worker.stop()
    return trace


def summarize(trace: Trace, args: argparse.Namespace, settings: Settings) -> dict[str, Any]:
    first = next((i for i, v in enumerate(trace.lags) if v >= settings.lag_warn), 0)
    steady = [float(v) for v in trace.lags[first:]] or [0.0]
    lag = distribution(steady, digits=0)
    backlogs = trace.backlogs[first:] or [0]
    idle = sum(1 for v in backlogs if v == 0) / len(backlogs)
    produced = trace.sent / args.seconds
    consumed = trace.processed / trace.seconds
    return {
        "lag": lag,
        "band": lag["p95"] - lag["p5"],
        "idle_fraction": round(idle, 3),
        "producer_msgs_per_s": round(produced, 1),
        "consumed_msgs_per_s": round(consumed, 1),
        "producer_vs_consumed": round(produced / consumed, 3) if consumed else 0.0,
    }


def chart_skipped() -> str | None:
    """None when the chart can be drawn; otherwise the note printed instead of one."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "chart skipped: matplotlib not installed (pip install -e '.[bench]')"
    return None


def plot(traces: list[Trace], settings: Settings, path: Path) -> Path:
    """The lag over time of each run, the warn and pause limits as lines."""
    import matplotlib

    matplotlib.use("Agg")  # a file only: no display needed
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(10, 5.2), dpi=100)
    try:
        for trace in traces:
            axes.plot(trace.times, trace.lags, label=trace.run.name, linewidth=1.2)
        for limit, name in ((settings.lag_warn, "warn"), (settings.lag_pause, "pause")):
            axes.axhline(limit, color="grey", linestyle="--", linewidth=1)
            axes.annotate(
                f"{name} {limit}", (1, limit), xycoords=("axes fraction", "data"), ha="right"
            )
        axes.set(title="Consumer lag (backlog + pending)", xlabel="seconds", ylabel="lag")
        axes.set_xlim(left=0)
        axes.set_ylim(bottom=0)
        axes.legend(loc="upper left")
        figure.tight_layout()
        path.parent.mkdir(parents=True, exist_ok=True)
        figure.savefig(path, format="png")
    finally:
        plt.close(figure)
    return path


def main(argv: list[str] | None = None) -> int:
    parser = base_parser(NAME, __doc__)
    parser.add_argument("--seconds", type=float, default=None, help="publish time per run")
    parser.add_argument("--service-ms", type=int, default=10, help="service time per message")
    parser.add_argument("--workers", type=int, default=2)
    # A read of 100 is a second of work at 10 ms: the lag would move in steps of 100.
    parser.add_argument("--worker-count", type=int, default=10, help="worker --count")
    parser.add_argument("--runs", default=",".join(r.name for r in RUNS))
    parser.add_argument("--png", type=Path, default=PNG)
    parser.add_argument("--role-producer", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--producer-id", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.seconds is None:
        args.seconds = 5.0 if args.quick else 60.0
    if args.role_producer:
        return producer_main(args)

    chosen = [r for r in RUNS if r.name in {n.strip() for n in args.runs.split(",")}]
    traces: list[Trace] = []
    with redis_server() as server, scratch_dir("bench-backpressure-") as tmp:
        info = machine_info(raw_client(server.url))
        settings = bench_settings(server.url, tmp, **COUNT_LIMITS)
        for run in chosen:
            trace = run_one(run, server.url, tmp, args)
            traces.append(trace)
            print(f"  {run.name:<12} sent {trace.sent:>7,}  processed {trace.processed:>7,}")
    figures = {t.run.name: summarize(t, args, settings) for t in traces}
    checks = {
        run: {name: bool(check(f, settings)) for name, check in TARGETS}
        for run, f in figures.items()
    }
    print_table(
        f"{args.workers} workers x {args.service_ms} ms/message, reading {args.worker_count} "
        f"at a time, {args.seconds:.0f} s per run, "
        f"warn {settings.lag_warn} / pause {settings.lag_pause}",
        ["run", "lag p5", "p50", "p95", "max", "p95-p5", "idle", "prod/s", "cons/s"],
        [
            [name, *(f["lag"][p] for p in ("p5", "p50", "p95", "max")), f["band"]]
            + [f[k] for k in ("idle_fraction", "producer_msgs_per_s", "consumed_msgs_per_s")]
            for name, f in figures.items()
        ],
    )
    print_table(
        "targets (PASS/MISS)",
        ["run", *(name for name, _ in TARGETS)],
        [
            (name, *("PASS" if ok else "MISS" for ok in result.values()))
            for name, result in checks.items()
        ],
    )
    skipped = chart_skipped()  # the figures first: a missing chart never loses them
    png = None if skipped else str(args.png)
    emit_json(
        NAME,
        {
            "seconds_per_run": args.seconds,
            "workers": args.workers,
            "service_ms": args.service_ms,
            "lag_warn": settings.lag_warn,
            "lag_pause": settings.lag_pause,
            "runs": figures,
            "targets": checks,
            "png": png,
            "machine": info,
        },
    )
    if skipped:
        print(f"\n  {skipped}", flush=True)
    else:
        print(f"\n  lag plot: {plot(traces, settings, args.png)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
