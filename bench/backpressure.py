"""Backpressure: lag band, oscillation, consumer idle time and producer rate under three guards.

A producer much faster than the consumers (2 worker processes, a fixed service time per
message via ``--simulate-latency-ms``) publishes for a fixed time under each guard in turn:

* ``binary``: the first Sentinel-L7 guard (seed 004's "before"): publish one message at a
  time at full speed; at or above the hard limit stop, polling, until lag is below it.
* ``original``: seed 004's two-threshold guard verbatim: read the lag key before every
  XADD; above ``lag_pause`` spin (100 ms polls) until it is not; above ``lag_warn`` sleep a
  fixed 500 ms.
* ``ours``: :func:`sentinel_platform.streams.publish.publish_rows` with
  :class:`~sentinel_platform.streams.backpressure.BackpressureGuard` (graduated), batches
  of ``SENTINEL_PUBLISH_BATCH_SIZE``: the path the Spark assets publish through.

All three read the same signal (the lag key the workers write) with the same thresholds,
against fresh workers and a fresh stream each, on one redis-server. The bench samples
the true lag (backlog + pending, from XINFO GROUPS) every 100 ms. Consumer idle fraction
is ``1 - processed x service_time / (workers x duration)``: the share of worker capacity
left unused (it includes the per-message overhead beyond the service time, alike for all
guards); "starved" is the share of samples at lag 0, when the consumers had nothing at all.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse
import contextlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import redis

from bench._common import (
    PYTHON,
    REPO_ROOT,
    Fleet,
    base_parser,
    bench_settings,
    child_env,
    distribution,
    emit_json,
    machine_info,
    print_table,
    raw_client,
    redis_server,
    scratch_dir,
    unacked,
    wait_leases,
    wait_until,
)
from bench._plot import PALETTE, HLine, Series, line_chart
from sentinel_platform.settings import Settings
from sentinel_platform.streams.keys import StreamKeys, transaction_keys

NAME = "backpressure"
GUARDS = ("binary", "original", "ours")
EXPERIMENTS = ("ours-measured",)
PNG = REPO_ROOT / "bench" / "out" / "backpressure.png"
SAMPLE_S = 0.1


# --- producers (run as a child process via --role producer) -------------------------------


def _lag(client: redis.Redis, keys: StreamKeys) -> int:
    """The original's reading: the worker-written key, missing = 0."""
    value = client.get(keys.lag)
    return int(value) if value is not None else 0


def _messages(prefix: str) -> Iterator[dict[str, str]]:
    index = 0
    while True:
        yield {"k": f"{prefix}-{index}", "data": "x" * 200}
        index += 1


def produce_binary(
    client: redis.Redis, keys: StreamKeys, settings: Settings, stop: Callable[[], bool]
) -> int:
    sent = 0
    for fields in _messages("binary"):
        if stop():
            break
        while _lag(client, keys) >= settings.lag_pause and not stop():
            time.sleep(settings.lag_pause_poll_ms / 1000)
        client.xadd(keys.stream, fields)
        sent += 1
    return sent


def produce_original(
    client: redis.Redis, keys: StreamKeys, settings: Settings, stop: Callable[[], bool]
) -> int:
    """Seed 004's loop: lag key before every XADD, fixed soft sleep, spin above the hard limit."""
    sent = 0
    for fields in _messages("original"):
        if stop():
            break
        lag = _lag(client, keys)
        if lag > settings.lag_pause:
            while _lag(client, keys) > settings.lag_pause and not stop():
                time.sleep(settings.lag_pause_poll_ms / 1000)
        elif lag > settings.lag_warn:
            time.sleep(settings.lag_warn_sleep_ms / 1000)
        client.xadd(keys.stream, fields)
        sent += 1
    return sent


def produce_ours(
    client: redis.Redis,
    keys: StreamKeys,
    settings: Settings,
    stop: Callable[[], bool],
    fresh: bool = False,
) -> int:
    from sentinel_platform.streams.backpressure import (
        BackpressureConfig,
        BackpressureGuard,
        PublishInterrupted,
    )
    from sentinel_platform.streams.publish import publish_rows

    sent = 0

    def entries() -> Iterator[dict[str, str]]:
        nonlocal sent
        for fields in _messages("ours"):
            if stop():
                return
            sent += 1
            yield fields

    guard = BackpressureGuard(client, keys, BackpressureConfig.from_settings(settings), stop)
    if fresh:
        guard.read_signal = _measured_signal(guard)  # type: ignore[method-assign]
    with contextlib.suppress(PublishInterrupted):  # the deadline ended a wait
        publish_rows(client, keys, entries(), settings.publish_batch_size, guard)
    return sent


def _measured_signal(guard: Any) -> Callable[[], Any]:
    """Experiment: our guard fed the group's lag measured now instead of the worker's key."""
    from sentinel_platform.streams.backpressure import Signal
    from sentinel_platform.streams.lag import measure_lag

    def read_signal() -> Signal:
        lag = measure_lag(guard.client, guard.keys).lag
        guard.stats.max_lag = max(guard.stats.max_lag, lag)
        return Signal(lag=lag, source="measured", paused_flag=False, stop=False)

    return read_signal


def produce_ours_measured(
    client: redis.Redis, keys: StreamKeys, settings: Settings, stop: Callable[[], bool]
) -> int:
    return produce_ours(client, keys, settings, stop, fresh=True)


PRODUCERS = {
    "binary": produce_binary,
    "original": produce_original,
    "ours": produce_ours,
    "ours-measured": produce_ours_measured,
}


def producer_main(args: argparse.Namespace) -> int:
    from sentinel_platform.settings import load_settings

    settings = load_settings()
    keys = transaction_keys(settings)
    client = redis.Redis.from_url(settings.redis_url_value, decode_responses=True)
    deadline = time.monotonic() + args.seconds
    started = time.monotonic()
    sent = PRODUCERS[args.role_guard](client, keys, settings, lambda: time.monotonic() > deadline)
    print(json.dumps({"sent": sent, "seconds": time.monotonic() - started}), flush=True)
    return 0


# --- the measurement ---------------------------------------------------------------------


@dataclass
class Trace:
    guard: str
    times: list[float] = field(default_factory=list)
    lags: list[int] = field(default_factory=list)
    sent: int = 0
    processed: int = 0
    seconds: float = 0.0


def _sample(client: redis.Redis, keys: StreamKeys, trace: Trace, done: threading.Event) -> None:
    started = time.monotonic()
    while not done.is_set():
        try:
            lag = unacked(client, keys.stream, keys.group)
        except (redis.ResponseError, StopIteration):
            lag = 0
        trace.times.append(time.monotonic() - started)
        trace.lags.append(lag)
        done.wait(SAMPLE_S)


def run_guard(guard: str, url: str, tmp: Path, args: argparse.Namespace) -> Trace:
    home = tmp / guard
    stream = f"bench:bp:{guard}"
    overrides = {"transactions_stream": stream}
    settings = bench_settings(url, home, **overrides)
    keys = transaction_keys(settings)
    client = raw_client(url)
    env = child_env(url, home, **overrides)
    trace = Trace(guard)
    with Fleet(tmp) as fleet:
        workers = [
            fleet.worker(
                "transactions",
                f"bp-{guard}-{i}",
                env,
                "bench.processors:noop",
                count=args.worker_count,
                simulate_latency_ms=args.service_ms,
            )
            for i in range(args.workers)
        ]
        wait_leases(client, keys, workers)
        done = threading.Event()
        sampler = threading.Thread(target=_sample, args=(client.client(), keys, trace, done))
        results_before = _results(client, keys)
        producer = fleet.spawn(
            f"producer-{guard}",
            [PYTHON, __file__, "--role-guard", guard, "--seconds", str(args.seconds)],
            env,
        )
        sampler.start()
        started = time.monotonic()
        wait_until(lambda: not producer.alive(), args.seconds + 30, 0.05, "producer exit")
        trace.seconds = time.monotonic() - started
        done.set()
        sampler.join()
        trace.processed = _results(client, keys) - results_before
        report = json.loads(producer.log_text().strip().splitlines()[-1])
        trace.sent = int(report["sent"])
        trace.seconds = float(report["seconds"])
        for worker in workers:
            worker.stop()
    return trace


def _results(client: redis.Redis, keys: StreamKeys) -> int:
    return int(client.xlen(keys.results))


def summarize(trace: Trace, args: argparse.Namespace) -> dict:
    lag = distribution([float(v) for v in trace.lags], digits=0)
    capacity = args.workers * trace.seconds * 1000 / args.service_ms
    idle = max(0.0, 1.0 - trace.processed / capacity) if capacity else None
    return {
        "lag": lag,
        "amplitude": lag["p95"] - lag["p5"],
        "idle_fraction": round(idle, 3) if idle is not None else None,
        "starved_fraction": round(sum(1 for v in trace.lags if v == 0) / len(trace.lags), 3),
        "producer_msgs_per_s": round(trace.sent / trace.seconds, 1),
        "consumed_msgs_per_s": round(trace.processed / trace.seconds, 1),
    }


def plot(traces: list[Trace], settings: Settings, path: Path) -> Path:
    series = [
        Series(trace.guard, trace.times, trace.lags, color)
        for trace, color in zip(traces, PALETTE, strict=False)
    ]
    return line_chart(
        path,
        "Consumer lag (backlog + pending) per producer guard",
        series,
        "seconds",
        "lag (messages)",
        [
            HLine(settings.lag_warn, f"warn {settings.lag_warn}"),
            HLine(settings.lag_pause, f"pause {settings.lag_pause}"),
        ],
    )


def main() -> int:
    parser = base_parser(__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=None, help="publish time per guard")
    parser.add_argument("--service-ms", type=int, default=10, help="service time per message")
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument(
        "--worker-count", type=int, default=None, help="worker --count (default: setting)"
    )
    parser.add_argument("--guards", default=",".join(GUARDS))
    parser.add_argument("--png", type=Path, default=PNG)
    parser.add_argument("--role-guard", choices=GUARDS + EXPERIMENTS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.seconds is None:
        args.seconds = 20.0 if args.quick else 60.0
    if args.role_guard:
        return producer_main(args)

    traces: list[Trace] = []
    with redis_server() as server, scratch_dir("bench-backpressure-") as tmp:
        info = machine_info(raw_client(server.url))
        settings = bench_settings(server.url, tmp)
        for guard in args.guards.split(","):
            trace = run_guard(guard, server.url, tmp, args)
            traces.append(trace)
            print(f"  {guard:<9} sent {trace.sent:>7,}  processed {trace.processed:>7,}")
    figures = {trace.guard: summarize(trace, args) for trace in traces}
    print_table(
        f"{args.workers} workers x {args.service_ms} ms/message, {args.seconds:.0f} s per guard, "
        f"warn {settings.lag_warn} / pause {settings.lag_pause}",
        [
            "guard",
            "lag p5",
            "p50",
            "p95",
            "max",
            "p95-p5",
            "idle",
            "starved",
            "producer/s",
            "consumed/s",
        ],
        [
            (
                guard,
                f["lag"]["p5"],
                f["lag"]["p50"],
                f["lag"]["p95"],
                f["lag"]["max"],
                f["amplitude"],
                f["idle_fraction"],
                f["starved_fraction"],
                f["producer_msgs_per_s"],
                f["consumed_msgs_per_s"],
            )
            for guard, f in figures.items()
        ],
    )
    png = plot(traces, settings, args.png)
    print(f"\n  lag plot: {png}")
    emit_json(
        NAME,
        {
            "seconds_per_guard": args.seconds,
            "workers": args.workers,
            "service_ms": args.service_ms,
            "lag_warn": settings.lag_warn,
            "lag_pause": settings.lag_pause,
            "guards": figures,
            "png": str(png.relative_to(REPO_ROOT)) if png.is_relative_to(REPO_ROOT) else str(png),
            "machine": info,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
