"""End to end: one day's transactions from the real code location to the last verdict.

Usage: ``python bench/end_to_end.py [--quick] [--rows N] [--workers 1,2] [--no-slow]``

Starts its own server on a free port (no persistence; or uses ``REDIS_URL``), a scratch
``SENTINEL_HOME`` and ``DAGSTER_HOME`` and no ``SENTINEL_*`` overrides: the settings'
defaults, as ``sentinel up`` runs them. Everything goes through public entry points:

* the run: ``dagster asset materialize -m sentinel_platform.definitions`` of
  ``raw_transactions``, ``enriched_transactions`` (with its blocking check) and
  ``transaction_stream`` for one partition of ``--rows`` generated rows (200,000 with
  ``--quick``, 2,000,000 otherwise), in a child process, as the UI's Materialize does;
* the workers: ``python -m workers.watch_transactions`` child processes;
* the daemon's part: the code location's lag sensor (``consumer_lag_sensor``), evaluated
  by this process at its own minimum interval while a run is in flight, so pauses and
  alerts come from the real gate; the alerts are read back from the alert stream the
  ``AlertSink`` writes (``Settings.alerts_stream``);
* the run's figures: its event log and ``transaction_stream``'s materialization metadata.

Per pool size (``--workers``): the pool's drain rate on a prefilled stream, then one run
with the pool consuming while Spark publishes (both share the machine's cores). A sampler
(every 50 ms) records the stream's length, the group's processed count and lag, and the
pause flag. Reported: publish-step rows/s, the drain rate while Spark publishes, time from
the run's start and from the first published row to the last verdict, the fixed costs of
Dagster (CLI start-up, run start, gaps between steps) and of Spark (the steps before the
publish, the publish step's start before its first row) apart, max lag, pauses, alerts by
severity. Then, unless ``--no-slow``, one more run (half the rows with ``--quick``) with
one worker that is replaced, once a fifth of the rows is published, by one at least 10x
slower (``--simulate-latency-ms``, whole milliseconds: 1 ms is already more than 10x for a
fast pool; the slow rate is reported) for at least one lag-gate interval, then by a
healthy one again. The slowdown counts as measured when the pool's own drain-rate figure
(``streams.keys.drain_rate_key``, where this version has one) falls below a third of the
healthy rate; a stop is a stretch of at least two pacing intervals in which the stream
does not grow; paused means the pause flag is set or the queued work (``work_seconds_key``)
is at ``lag_pause_s``.

Goals (PASS/MISS): publish step >= 0.8x the pool's prefilled drain rate; first published
row to last verdict <= 1.3x (rows / drain rate); 0 WARN/ERROR alerts and 0 pauses with a
healthy pool; with the slowed pool, the producer stops within one pacing interval
(``lag_warn_sleep_ms``) of the slowdown being measured, publishes nothing while the pause
flag is set, and the run completes once the pool recovers. Ends with one JSON line.
"""

from __future__ import annotations

import contextlib
import json
import os
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import itertools

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
from sentinel_platform.settings import Settings, load_settings
from sentinel_platform.streams.plumbing import keys as stream_keys
from sentinel_platform.streams.plumbing.keys import StreamKeys, axiom_keys, transaction_keys
from sentinel_platform_tests.harness.processes import PYTHON, Child, Fleet, child_env, wait_leases
from sentinel_platform_tests.harness.streams import fill_stream
from sentinel_platform_tests.harness.waits import WaitTimeout, wait_until

DAY = "2026-11-20"
ASSETS = "raw_transactions,enriched_transactions,transaction_stream"
PUBLISH_GOAL = 0.8
LATENCY_GOAL = 1.3
SLOWDOWN = 10
SAMPLE_S = 0.05
WARN_SEVERITIES = ("warning", "error", "critical")


# --- observation ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Sample:
    at: float  # time.time()
    published: int  # XLEN of the stream
    processed: int  # entries the group read and acknowledged
    lag: int  # backlog + pending
    paused: bool  # the pause flag is set
    pool_rate: float | None  # the pool's own measured drain rate, where it publishes one
    work_s: float | None  # the queued work in seconds, where the pool publishes it


def as_float(value: object) -> float | None:
    try:
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None


def group_counts(client: redis.Redis, keys: StreamKeys) -> tuple[int, int]:
    """(processed, lag) of the workers' group: entries read minus pending, and unacked."""
    try:
        groups = client.xinfo_groups(keys.stream)
    except redis.ResponseError:
        return 0, 0
    mine = next((g for g in groups if g["name"] == keys.group), None)
    if mine is None:
        return 0, 0
    read = int(mine.get("entries-read") or 0)
    pending = int(mine["pending"])
    return read - pending, int(mine.get("lag") or 0) + pending


@dataclass
class Sampler:
    """Samples the stream every :data:`SAMPLE_S` in a thread until stopped."""

    url: str
    keys: StreamKeys
    samples: list[Sample] = field(default_factory=list)
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> Sampler:
        self._thread = threading.Thread(target=self._run, name="sampler", daemon=True)
        self._thread.start()
        return self

    def _run(self) -> None:
        client = raw_client(self.url)
        # The pool's drain-rate key, if this version has one (a float in rows/s).
        rate_key = getattr(stream_keys, "drain_rate_key", None)
        work_key = getattr(stream_keys, "work_seconds_key", None)
        while not self._stop.is_set():
            with contextlib.suppress(redis.RedisError):
                pipe = client.pipeline(transaction=False)
                pipe.xlen(self.keys.stream)
                pipe.exists(self.keys.paused)
                pipe.get(rate_key(self.keys) if rate_key else self.keys.stream + ":-")
                pipe.get(work_key(self.keys) if work_key else self.keys.stream + ":-")
                published, paused, rate, work = pipe.execute()
                processed, lag = group_counts(client, self.keys)
                self.samples.append(
                    Sample(
                        time.time(),
                        published,
                        processed,
                        lag,
                        paused > 0,
                        as_float(rate),
                        as_float(work),
                    )
                )
            self._stop.wait(SAMPLE_S)

    def stop(self) -> list[Sample]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(5)
        return self.samples

    def latest(self) -> Sample | None:
        return self.samples[-1] if self.samples else None


class LagGate:
    """The code location's lag sensor, evaluated here as the daemon would, in a thread."""

    def __init__(self) -> None:
        import dagster as dg

        from sentinel_platform.definitions import defs

        self.instance = dg.DagsterInstance.get()
        self.sensor = next(s for s in defs.sensors or [] if "lag" in s.name)
        self.resources = defs.resources or {}
        self.interval_s = float(self.sensor.minimum_interval_seconds or 30)
        self.cursor: str | None = None
        self.ticks = 0
        self.errors: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def tick(self) -> None:
        import dagster as dg

        try:
            with dg.build_sensor_context(
                instance=self.instance, cursor=self.cursor, resources=self.resources
            ) as context:
                result = self.sensor(context)
            self.cursor = getattr(result, "cursor", None) or context.cursor
            self.ticks += 1
        except Exception as exc:  # the bench reports it; the gate is not its subject
            self.errors.append(f"{type(exc).__name__}: {exc}"[:300])

    def _run(self) -> None:
        while not self._stop.is_set():
            self.tick()
            self._stop.wait(self.interval_s)

    @contextlib.contextmanager
    def running(self) -> Iterator[LagGate]:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="lag-gate", daemon=True)
        self._thread.start()
        try:
            yield self
        finally:
            self._stop.set()
            self._thread.join(60)


# --- the pieces under test -----------------------------------------------------------------


def prefill_entries(count: int) -> Iterator[dict[str, str]]:
    """Valid wire transactions, varied like the generator's (a few threats included)."""
    from sentinel_platform.schemas import Transaction

    shapes = [
        ("Costco Wholesale", "retail", "USD", 84.25, "Weekly groceries"),
        ("Kim's Convenience", "grocery", "CAD", 6.5, "Milk and bread"),
        ("Pacific Forex", "forex", "EUR", 1250.0, "FX settlement"),
        ("RapidRemit", "suspicious", "USD", 497.5, "URGENT wire transfer, no questions"),
    ]
    for index in range(count):
        merchant, category, currency, amount, message = shapes[index % 7 % len(shapes)]
        yield Transaction(
            id=f"pre-{index}",
            merchant=merchant,
            category=category,
            currency=currency,
            amount=amount,
            message=message,
            source="bench",
            timestamp=f"{DAY}T10:{index // 60 % 60:02d}:{index % 60:02d}Z",
        ).to_fields()


def start_pool(
    fleet: Fleet,
    client: redis.Redis,
    keys: StreamKeys,
    env: dict[str, str],
    workers: int,
    prefix: str,
    latency_ms: int | None = None,
) -> list[Child]:
    pool = [
        fleet.worker("transactions", f"{prefix}-{i}", env, simulate_latency_ms=latency_ms)
        for i in range(workers)
    ]
    wait_leases(client, keys, pool, timeout_s=120)
    return pool


def axiom_worker(fleet: Fleet, client: redis.Redis, env: dict[str, str], name: str) -> Child:
    """The idle axioms worker ``sentinel up`` also starts (the lag gate checks both streams)."""
    child = fleet.worker("axioms", name, env)
    wait_leases(client, axiom_keys(load_settings()), [child], timeout_s=120)
    return child


def stop_pool(pool: Sequence[Child]) -> None:
    for child in pool:
        child.stop(timeout_s=30)


def drain_rate(
    fleet: Fleet, client: redis.Redis, keys: StreamKeys, env: dict[str, str], workers: int, n: int
) -> dict[str, Any]:
    """rows/s of ``workers`` workers on a stream prefilled with ``n`` entries."""
    client.flushdb()
    fill_stream(client, keys.stream, prefill_entries(n))
    sampler = Sampler(env["REDIS_URL"], keys).start()
    pool = start_pool(fleet, client, keys, env, workers, f"drain{workers}")
    try:
        wait_until(lambda: (s := sampler.latest()) and s.processed >= n, 600, 0.05, "drain")
    finally:
        samples = sampler.stop()
        stop_pool(pool)
    first = next(s for s in samples if s.processed > 0)
    last = next(s for s in samples if s.processed >= n)
    seconds = max(last.at - first.at, 1e-6)
    return {
        "rows": n,
        "seconds": round(seconds, 3),
        "rows_per_s": round((n - first.processed) / seconds),
    }


def materialize(fleet: Fleet, env: dict[str, str], rows: int, name: str) -> Child:
    config = {"ops": {"raw_transactions": {"config": {"rows": rows}}}}
    argv = [
        str(Path(PYTHON).with_name("dagster")),
        "asset",
        "materialize",
        "-m",
        "sentinel_platform.definitions",
        "--select",
        ASSETS,
        "--partition",
        DAY,
        "--config-json",
        json.dumps(config),
    ]
    return fleet.spawn(name, argv, env)


def check_run(run: Child) -> None:
    """A failed materialization ends the bench, with the end of its log."""
    if run.process.returncode != 0:
        raise RuntimeError(f"{run.name} exited with {run.process.returncode}:\n{run.log_tail(40)}")


def run_figures(instance: Any) -> dict[str, Any]:
    """The latest run's status, step times and the stream's materialization metadata."""
    import dagster as dg

    (run,) = instance.get_runs(limit=1)
    steps: dict[str, dict[str, float]] = {}
    run_start = None
    for record in instance.all_logs(run.run_id):
        event = record.dagster_event
        if event is None:
            continue
        kind = event.event_type_value
        if kind in ("RUN_START", "PIPELINE_START"):
            run_start = record.timestamp
        elif kind == "STEP_START" and event.step_key:
            steps.setdefault(event.step_key, {})["start"] = record.timestamp
        elif kind in ("STEP_SUCCESS", "STEP_FAILURE") and event.step_key:
            steps.setdefault(event.step_key, {})["end"] = record.timestamp
    meta: dict[str, Any] = {}
    materialization = instance.get_latest_materialization_event(dg.AssetKey("transaction_stream"))
    if materialization is not None and materialization.run_id == run.run_id:
        asset_materialization = materialization.asset_materialization
        if asset_materialization is not None:
            meta = {k: v.value for k, v in asset_materialization.metadata.items()}
    return {
        "run_id": run.run_id,
        "status": run.status.value,
        "run_start": run_start,
        "steps": steps,
        "publish": meta,
    }


def alerts_by_severity(client: redis.Redis, settings: Settings) -> dict[str, int]:
    entries: list[tuple[str, dict[str, str]]] = client.xrange(settings.alerts_stream)  # type: ignore[assignment]
    return dict(Counter(fields.get("severity", "?") for _, fields in entries))


def first_at(samples: Sequence[Sample], predicate: Any, after: float = 0.0) -> float | None:
    return next((s.at for s in samples if s.at >= after and predicate(s)), None)


def rate_between(samples: Sequence[Sample], start: float, end: float) -> float | None:
    inside = [s for s in samples if start <= s.at <= end]
    if len(inside) < 2 or inside[-1].at - inside[0].at < 0.5:
        return None
    return (inside[-1].processed - inside[0].processed) / (inside[-1].at - inside[0].at)


def stops(samples: Sequence[Sample], min_s: float) -> list[tuple[float, float]]:
    """Stretches of at least ``min_s`` in which the stream did not grow, before it was full."""
    found, start = [], None
    for before, now in itertools.pairwise(samples):
        if now.published == before.published:
            start = before.at if start is None else start
            continue
        if start is not None and before.at - start >= min_s:
            found.append((start, before.at))
        start = None
    return found


def in_pause(sample: Sample, pause_s: float | None) -> bool:
    """The pause flag is set, or the queued work is at the hard limit (seconds of work)."""
    zone = pause_s is not None and sample.work_s is not None and sample.work_s >= pause_s
    return sample.paused or zone


def pause_time(samples: Sequence[Sample], pause_s: float | None) -> float:
    return sum(b.at - a.at for a, b in itertools.pairwise(samples) if in_pause(a, pause_s))


def published_while_paused(
    samples: Sequence[Sample], grace_s: float, pause_s: float | None = None
) -> int:
    """Rows added to the stream once the pause flag had been set, or the queued work had
    been at the hard limit, for over ``grace_s`` (a batch in flight may still land)."""
    added, since = 0, None
    for before, now in itertools.pairwise(samples):
        if in_pause(before, pause_s) and in_pause(now, pause_s):
            since = before.at if since is None else since
            if before.at - since >= grace_s:
                added += now.published - before.published
        else:
            since = None
    return added


# --- one run -------------------------------------------------------------------------------


@dataclass
class RunContext:
    fleet: Fleet
    client: redis.Redis
    keys: StreamKeys
    env: dict[str, str]
    settings: Settings
    gate: LagGate
    rows: int


def published_run(ctx: RunContext, workers: int, drain: dict[str, Any]) -> dict[str, Any]:
    """One materialization with ``workers`` healthy workers consuming as it publishes."""
    ctx.client.flushdb()
    pool = start_pool(ctx.fleet, ctx.client, ctx.keys, ctx.env, workers, f"run{workers}")
    pool.append(axiom_worker(ctx.fleet, ctx.client, ctx.env, f"ax-run{workers}"))
    sampler = Sampler(ctx.env["REDIS_URL"], ctx.keys).start()
    ticks = ctx.gate.ticks
    launched = time.time()
    try:
        with ctx.gate.running():
            run = materialize(ctx.fleet, ctx.env, ctx.rows, f"materialize-{workers}")
            wait_until(lambda: not run.alive(), 1800, 0.2, "the run")
            check_run(run)
            done = wait_until(
                lambda: (s := sampler.latest()) and s.processed >= ctx.rows and s,
                300,
                0.05,
                "the last verdict",
            )
    finally:
        samples = sampler.stop()
        stop_pool(pool)
    figures = run_figures(ctx.gate.instance)
    publish = figures["publish"]
    first_row = first_at(samples, lambda s: s.published > 0)
    assert isinstance(done, Sample)
    last_verdict = done.at
    publish_end = first_at(samples, lambda s: s.published >= ctx.rows) or last_verdict
    during = rate_between(samples, first_row or launched, publish_end)
    steps = figures["steps"]
    run_start = figures["run_start"] or launched
    spark_steps = {
        key: round(times["end"] - times["start"], 3)
        for key, times in steps.items()
        if "start" in times and "end" in times
    }
    stream_step: dict[str, float] = next(
        (t for k, t in steps.items() if k.endswith("transaction_stream")), {}
    )
    ordered = sorted(
        (t for t in steps.values() if "start" in t and "end" in t), key=lambda t: t["start"]
    )
    gaps = sum(max(0.0, b["start"] - a["end"]) for a, b in itertools.pairwise(ordered))
    first_step = ordered[0]["start"] if ordered else run_start
    alerts = alerts_by_severity(ctx.client, ctx.settings)
    pause_flag_s = sum(b.at - a.at for a, b in itertools.pairwise(samples) if a.paused)
    hard = int(publish.get("hard_backpressure_events") or 0)
    expected_s = ctx.rows / drain["rows_per_s"]
    first_to_last = last_verdict - first_row if first_row else None
    return {
        "workers": workers,
        "status": figures["status"],
        "publish_rows_per_s": publish.get("rows_per_s"),
        "publish_s": publish.get("duration_s"),
        "drain_prefilled_rows_per_s": drain["rows_per_s"],
        "drain_while_publishing_rows_per_s": round(during) if during else None,
        "publish_x_drain": ratio(publish.get("rows_per_s"), drain["rows_per_s"]),
        "launch_to_last_verdict_s": round(last_verdict - launched, 3),
        "run_start_to_last_verdict_s": round(last_verdict - run_start, 3),
        "first_row_to_last_verdict_s": round(first_to_last, 3) if first_to_last else None,
        "rows_over_drain_s": round(expected_s, 3),
        "first_row_to_last_verdict_x": ratio(first_to_last, expected_s),
        "dagster_fixed_s": {
            "cli_start_to_run_start": round(run_start - launched, 3),
            # in_process runs start their Spark session here, before the first step
            "run_start_to_first_step": round(first_step - run_start, 3),
            "between_steps": round(gaps, 3),
        },
        "spark_fixed_s": {
            "steps": spark_steps,
            "publish_step_start_to_first_row": round(first_row - stream_step["start"], 3)
            if first_row and "start" in stream_step
            else None,
        },
        "max_lag": max((s.lag for s in samples), default=0),
        "max_lag_seen_by_publisher": publish.get("max_lag_seen"),
        "paused_s": publish.get("paused_s"),
        "slowed_s": publish.get("slowed_s"),
        "hard_backpressure_events": hard,
        "soft_backpressure_events": publish.get("soft_backpressure_events"),
        "pause_flag_s": round(pause_flag_s, 3),
        "pause_zone_s": round(pause_time(samples, getattr(ctx.settings, "lag_pause_s", None)), 3),
        "pauses": hard + (1 if pause_flag_s > 0 else 0),
        "alerts": alerts,
        "warn_or_worse_alerts": sum(alerts.get(s, 0) for s in WARN_SEVERITIES),
        "gate_ticks": ctx.gate.ticks - ticks,
    }


def slowed_run(ctx: RunContext, drain: dict[str, Any], rows: int) -> dict[str, Any]:
    """One worker, replaced by a 10x slower one once publishing runs, then healthy again."""
    ctx.client.flushdb()
    per_row_ms = 1000.0 / drain["rows_per_s"]
    latency_ms = max(1, round((SLOWDOWN - 1) * per_row_ms))
    pacing_s = getattr(ctx.settings, "lag_warn_sleep_ms", 500) / 1000
    axioms = axiom_worker(ctx.fleet, ctx.client, ctx.env, "ax-slowed")
    pool = start_pool(ctx.fleet, ctx.client, ctx.keys, ctx.env, 1, "healthy")
    sampler = Sampler(ctx.env["REDIS_URL"], ctx.keys).start()
    slowed_at = recovered_at = None
    slow_rate: float | None = None
    completed = False
    try:
        with ctx.gate.running():
            run = materialize(ctx.fleet, ctx.env, rows, "materialize-slowed")
            wait_until(
                lambda: ((s := sampler.latest()) and s.published >= rows // 5) or not run.alive(),
                1800,
                0.05,
                "publishing to start",
            )
            stop_pool(pool)
            slowed_at = time.time()
            pool = start_pool(ctx.fleet, ctx.client, ctx.keys, ctx.env, 1, "slow", latency_ms)
            # Slow until the producer has stopped for a while (or 60 s) and the lag gate
            # has ticked at least once meanwhile, then recover.
            with contextlib.suppress(WaitTimeout):
                wait_until(
                    lambda: (
                        any(a >= slowed_at for a, _ in stops(sampler.samples, 4 * pacing_s))
                        or not run.alive()
                    ),
                    60,
                    0.1,
                    "a pause",
                )
            slow_for = ctx.gate.interval_s + 3 - (time.time() - slowed_at)
            if slow_for > 0 and run.alive():
                time.sleep(slow_for)
            slow_rate = rate_between(sampler.samples, slowed_at + 2.0, time.time())
            stop_pool(pool)
            recovered_at = time.time()
            pool = start_pool(ctx.fleet, ctx.client, ctx.keys, ctx.env, 1, "recovered")
            wait_until(lambda: not run.alive(), 1200, 0.2, "the run")
            check_run(run)
            with contextlib.suppress(WaitTimeout):
                completed = bool(
                    wait_until(lambda: (s := sampler.latest()) and s.processed >= rows, 300, 0.05)
                )
    finally:
        samples = sampler.stop()
        stop_pool([*pool, axioms])
    figures = run_figures(ctx.gate.instance)
    publish = figures["publish"]
    healthy = drain["rows_per_s"]
    # The slowdown is measured when the pool's own drain-rate figure falls below a third
    # of its healthy rate; where the pool publishes none, when the rate seen here over the
    # last second does (a 10x slower pool, or none during the swap, both count).
    measured_at = next(
        (
            s.at
            for s in samples
            if slowed_at
            and s.at >= slowed_at
            and s.pool_rate is not None
            and s.pool_rate < healthy / 3
        ),
        None,
    )
    measured_by = "pool drain-rate key" if measured_at else "observed rate"
    for sample in samples if measured_at is None else []:
        if slowed_at is None or sample.at < slowed_at + 1.0:
            continue
        rate = rate_between(samples, sample.at - 1.0, sample.at)
        if rate is not None and rate < healthy / 3:
            measured_at = sample.at - 1.0
            break
    pauses = [(a, b) for a, b in stops(samples, 2 * pacing_s) if slowed_at and a >= slowed_at - 1.0]
    pause_at = pauses[0][0] if pauses else None
    latency = round(pause_at - measured_at, 3) if pause_at and measured_at else None
    pause_s = getattr(ctx.settings, "lag_pause_s", None)
    leaked = published_while_paused(samples, pacing_s, pause_s)
    return {
        "rows": rows,
        "latency_ms": latency_ms,
        "slow_pool_rows_per_s": round(slow_rate) if slow_rate else None,
        "healthy_rows_per_s": healthy,
        "slowdown_measured_by": measured_by,
        "pacing_interval_s": pacing_s,
        "status": figures["status"],
        "completed": completed and figures["status"] == "SUCCESS",
        "slowed_at_s": round(slowed_at - samples[0].at, 3) if slowed_at and samples else None,
        "slowdown_measured_s": round(measured_at - samples[0].at, 3) if measured_at else None,
        "first_stop_s": round(pause_at - samples[0].at, 3) if pause_at else None,
        "stop_after_measured_s": latency,
        "recovered_at_s": round(recovered_at - samples[0].at, 3) if recovered_at else None,
        "stops": [(round(a - samples[0].at, 2), round(b - a, 2)) for a, b in pauses],
        "pause_flag_s": round(
            sum(b.at - a.at for a, b in itertools.pairwise(samples) if a.paused), 3
        ),
        "pause_zone_s": round(pause_time(samples, pause_s), 3),
        "max_work_s": max((s.work_s for s in samples if s.work_s is not None), default=None),
        "rows_published_while_paused": leaked,
        "stopped_by": "pause"
        if (publish.get("hard_backpressure_events") or 0) > 0 or pause_time(samples, pause_s) > 0
        else "pacing hold",
        "paused_s": publish.get("paused_s"),
        "hard_backpressure_events": publish.get("hard_backpressure_events"),
        "max_lag": max((s.lag for s in samples), default=0),
        "alerts": alerts_by_severity(ctx.client, ctx.settings),
    }


# --- main ----------------------------------------------------------------------------------


def verdict(ok: bool | None) -> str:
    return "PASS" if ok else "MISS"


def quiet(result: dict[str, Any]) -> bool:
    """No WARN/ERROR alert, no pause, and the run succeeded."""
    return (
        result["warn_or_worse_alerts"] == 0
        and result["pauses"] == 0
        and result["status"] == "SUCCESS"
    )


def stamp(at: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(at))


def main(argv: list[str] | None = None) -> int:
    parser = base_parser((__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, help="rows of the partition")
    parser.add_argument("--workers", default="1,2", help="pool sizes, comma-separated")
    parser.add_argument("--drain-rows", type=int, help="entries of the prefilled stream")
    parser.add_argument("--slow-rows", type=int, help="rows of the slowed-pool run")
    parser.add_argument("--no-slow", action="store_true", help="skip the slowed-pool run")
    args = parser.parse_args(argv)
    rows = args.rows or (200_000 if args.quick else 2_000_000)
    drain_rows = args.drain_rows or min(rows, 40_000 if args.quick else 200_000)
    slow_rows = args.slow_rows or (rows // 2 if args.quick else rows)
    pools = [int(n) for n in args.workers.split(",") if n.strip()]
    started = time.time()

    with (
        scratch_dir("bench-e2e-") as home,
        redis_server(config={"save": '""', "appendonly": "no"}) as server,
        Fleet(home) as fleet,
    ):
        dagster_home = home / "dagster"
        dagster_home.mkdir()
        (dagster_home / "dagster.yaml").write_text("")  # the defaults: SQLite in this home
        machine = machine_info(raw_client(server.url))
        env = child_env(server.url, home)
        env["DAGSTER_HOME"] = str(dagster_home)
        env.setdefault("PYSPARK_PYTHON", PYTHON)
        # This process evaluates the lag sensor with the same settings as the children.
        os.environ.update(
            {k: v for k, v in env.items() if k in ("REDIS_URL", "SENTINEL_HOME", "DAGSTER_HOME")}
        )
        os.environ["GX_ANALYTICS_ENABLED"] = "false"
        settings = load_settings()
        keys = transaction_keys(settings)
        client = raw_client(server.url)
        gate = LagGate()
        ctx = RunContext(fleet, client, keys, env, settings, gate, rows)
        results: list[dict[str, Any]] = []
        drains: dict[int, dict[str, Any]] = {}
        for workers in pools:
            print(f"... {workers} worker(s): drain of {drain_rows:,} prefilled", file=sys.stderr)
            drains[workers] = drain_rate(fleet, client, keys, env, workers, drain_rows)
            print(f"... {workers} worker(s): run of {rows:,} rows", file=sys.stderr, flush=True)
            results.append(published_run(ctx, workers, drains[workers]))
        slowed = None
        if not args.no_slow:
            if 1 not in drains:
                drains[1] = drain_rate(fleet, client, keys, env, 1, drain_rows)
            print(f"... slowed pool: run of {slow_rows:,} rows", file=sys.stderr, flush=True)
            slowed = slowed_run(ctx, drains[1], slow_rows)

    print_table(
        f"end to end, {rows:,} rows, settings' defaults, started {stamp(started)}",
        [
            "workers",
            "publish r/s",
            "drain prefilled",
            "drain publishing",
            "publish/drain",
            "run->last verdict s",
            "row1->last s",
            "x rows/drain",
            "max lag",
            "pauses",
            "warn+ alerts",
        ],
        [
            [
                r["workers"],
                r["publish_rows_per_s"],
                r["drain_prefilled_rows_per_s"],
                r["drain_while_publishing_rows_per_s"],
                r["publish_x_drain"],
                r["run_start_to_last_verdict_s"],
                r["first_row_to_last_verdict_s"],
                r["first_row_to_last_verdict_x"],
                r["max_lag"],
                r["pauses"],
                r["warn_or_worse_alerts"],
            ]
            for r in results
        ],
    )
    for r in results:
        print(
            f"  {r['workers']} worker(s): Dagster fixed {r['dagster_fixed_s']}; "
            f"Spark {r['spark_fixed_s']}; alerts {r['alerts'] or '{}'}"
        )
    if slowed:
        print(f"\nslowed pool: {json.dumps(slowed, default=str)}")
    for r in results:
        n = r["workers"]
        print(
            f"{n} worker(s): publish step {r['publish_x_drain']}x the prefilled drain rate "
            f"(goal >= {PUBLISH_GOAL}x) {verdict((r['publish_x_drain'] or 0) >= PUBLISH_GOAL)}"
        )
        print(
            f"{n} worker(s): first row to last verdict {r['first_row_to_last_verdict_x']}x "
            f"rows/drain (goal <= {LATENCY_GOAL}x) "
            f"{verdict((r['first_row_to_last_verdict_x'] or 99) <= LATENCY_GOAL)}"
        )
        print(
            f"{n} worker(s): {r['warn_or_worse_alerts']} WARN/ERROR alerts, {r['pauses']} pauses "
            f"(goal 0 and 0) "
            f"{verdict(quiet(r))}"
        )
    if slowed:
        lat = slowed["stop_after_measured_s"]
        print(
            f"slowed pool: producer stopped ({slowed['stopped_by']}) {lat}s after the slowdown "
            f"was measured (goal <= "
            f"{slowed['pacing_interval_s']}s) "
            f"{verdict(lat is not None and lat <= slowed['pacing_interval_s'])}"
        )
        print(
            f"slowed pool: {slowed['rows_published_while_paused']} rows published while paused "
            f"(pause flag or work at the hard limit for {slowed['pause_zone_s']}s; hard "
            f"episodes {slowed['hard_backpressure_events']}"
            f"{'' if slowed['pause_zone_s'] else ', not exercised'}) (goal 0) "
            f"{verdict(slowed['rows_published_while_paused'] == 0)}"
        )
        print(
            f"slowed pool: run completed after recovery: {slowed['completed']} "
            f"{verdict(slowed['completed'])}"
        )
    emit_json(
        "end_to_end",
        {
            "rows": rows,
            "drain_rows": drain_rows,
            "started_utc": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(started)),
            "wall_s": round(time.time() - started, 1),
            "pools": results,
            "slowed": slowed,
            "lag_gate_errors": gate.errors[:5],
            "goals": {"publish_x_drain": PUBLISH_GOAL, "first_row_to_last_x": LATENCY_GOAL},
            "machine": machine,
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
