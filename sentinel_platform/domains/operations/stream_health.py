"""Stream-health asset checks on each stream asset: lag, dead letters, delivery counts, and
whether the Redis server may evict the stream's keys (``maxmemory-policy``).

The verdicts are plain functions (``evaluate_*``) shared by the checks, which run on a
schedule or from the UI, and by the lag sensor, which evaluates the lag check before it
launches any publish run and records the result as an ``AssetCheckEvaluation``. That is
how a failing blocking check keeps the publish job from starting: the only automatic
launcher of publish runs is the lag gate, and it launches nothing while
``consumer_lag_within_limits`` fails with ERROR (see
:mod:`~sentinel_platform.domains.operations.lag_gate`).
Severity follows the lag card: WARN while elevated, ERROR under backpressure or with no
live worker. A stream with nothing published and nothing pending is *idle*: its check says
``idle: nothing to drain`` and its figures carry no drain rate (see :func:`idle_metadata`).
"""

from __future__ import annotations

import time
import typing
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg

from sentinel_platform.domains.operations.anomalies import Anomalies, find_anomalies, summarise
from sentinel_platform.domains.operations.targets import StreamTarget, stream_targets
from sentinel_platform.resources.settings import SettingsResource
from sentinel_platform.resources.stream_inspector import StreamInspector
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.peaks import Peaks
from sentinel_platform.streams.backlog.zones import (
    ZoneLimits,
    limits_from_settings,
    thresholds,
    work_seconds,
    zone,
)
from sentinel_platform.streams.operators.group_view import (
    LagSnapshot,
    dlq_depth,
    lag_snapshot,
    recent_dead_letters,
)
from sentinel_platform.streams.plumbing.eviction_policy import EvictionVerdict, server_verdict

LAG_CHECK = "consumer_lag_within_limits"
DLQ_CHECK = "dead_letter_queue_not_growing"
DELIVERY_CHECK = "no_delivery_count_anomalies"
EVICTION_CHECK = "redis_does_not_evict_stream_keys"
#: Dead letters counted as "recent" by the DLQ check.
DLQ_WINDOW_S = 900
#: That many recent dead letters of one stream make the DLQ check an ERROR.
DLQ_ERROR_COUNT = 10
ZONE_LEVEL = {"nominal": 0, "elevated": 1, "backpressure": 2, "worker_off": 3}
CHECKS_SCHEDULE_CRON = "*/5 * * * *"

WARN = dg.AssetCheckSeverity.WARN
ERROR = dg.AssetCheckSeverity.ERROR


def _target_type() -> type:
    """The type of ``dg.AssetCheckEvaluation``'s documented ``target_materialization_data``
    field. Dagster exports it under no public name, so it is read off the public class's
    field rather than imported from a private module that may move."""
    hint = typing.get_type_hints(dg.AssetCheckEvaluation)["target_materialization_data"]
    return next(arg for arg in typing.get_args(hint) if arg is not type(None))


#: A check evaluation's target: one materialisation (storage id, run id, timestamp).
MaterializationTarget = Any
_TARGET = _target_type()


def latest_materialization(
    instance: dg.DagsterInstance, asset_key: dg.AssetKey
) -> MaterializationTarget:
    """The asset's latest materialisation (any partition), as a check evaluation's target."""
    records = instance.fetch_materializations(
        dg.AssetRecordsFilter(asset_key=asset_key), limit=1
    ).records
    if not records:
        return None
    record = records[0]
    return _TARGET(
        storage_id=record.storage_id,
        run_id=record.run_id,
        timestamp=record.timestamp,
    )


@dataclass(frozen=True)
class Verdict:
    """A check outcome, convertible to a check result (in a run) or evaluation (in a sensor)."""

    passed: bool
    severity: dg.AssetCheckSeverity
    description: str
    metadata: dict[str, Any]

    def result(self) -> dg.AssetCheckResult:
        return dg.AssetCheckResult(
            passed=self.passed,
            severity=self.severity,
            description=self.description,
            metadata=self.metadata,
        )

    def evaluation(
        self,
        asset_key: dg.AssetKey,
        check_name: str,
        blocking: bool = False,
        target: MaterializationTarget = None,
    ) -> dg.AssetCheckEvaluation:
        """The verdict as a sensor reports it, about the materialisation ``target``.

        Without a target Dagster falls back to comparing timestamps, the evaluation's
        stored with whole-second precision, and the UI's "latest execution" then reads
        "Not evaluated" whenever the two land in the same second. Naming the target makes
        the latest state exact: it is about the materialisation the sensor saw.
        """
        return dg.AssetCheckEvaluation(
            asset_key=asset_key,
            check_name=check_name,
            passed=self.passed,
            severity=self.severity,
            description=self.description,
            metadata=self.metadata,
            blocking=blocking,
            target_materialization_data=target,
        )

    @property
    def blocks(self) -> bool:
        """A failure at ERROR severity: what a blocking check stops on."""
        return not self.passed and self.severity == ERROR


def evaluate_lag(snapshot: LagSnapshot, settings: Settings, peaks: Peaks | None = None) -> Verdict:
    """The lag card now; ``peaks`` (what workers and producers saw since the last tick) adds
    the highest lag and the backpressure episodes in between, so a short spike is recorded
    even when the current lag is back to normal. The verdict itself is about the present.

    Zones as everywhere (:mod:`sentinel_platform.streams.backlog.zones`): seconds of work at the
    fleet's drain rate past what the live workers published they hold in flight, or
    Sentinel-L7's counts when ``SENTINEL_LAG_WARN``/``SENTINEL_LAG_PAUSE`` are set."""
    limits = limits_from_settings(settings, snapshot.allowance, snapshot.climbing)
    rate = snapshot.drain_rate
    bounds = thresholds(limits, rate)
    current = zone(snapshot.zone_lag, rate, limits)
    peaks = peaks or Peaks()
    peak = max(snapshot.lag, peaks.lag_peak or 0)
    peak_zone = zone(peak, rate, limits)
    work = work_seconds(snapshot.lag, rate)
    metadata: dict[str, Any] = {
        "lag": snapshot.lag,
        "lag_peak": peak,
        "peak_zone": peak_zone,
        "peak_zone_level": max(ZONE_LEVEL[peak_zone], ZONE_LEVEL[current]),
        "hard_backpressure_episodes": peaks.hard_episodes,
        "soft_backpressure_episodes": peaks.soft_episodes,
        "pending": snapshot.reading.pending,
        "backlog": snapshot.reading.backlog,
        "consumers_alive": snapshot.consumers_alive,
        "worker_reported": snapshot.worker_lag is not None,
        "zone": current,
        "zone_level": ZONE_LEVEL[current],
        "work_s": work,
        "peak_work_s": work_seconds(peak, rate),
        "drain_rate_per_s": None if rate is None else round(rate, 1),
        "in_flight": limits.in_flight,
        "limit_climbing": limits.climbing,
        "limits_unit": limits.unit,
        "lag_warn_s": None if limits.unit == "messages" else limits.warn_s,
        "lag_pause_s": None if limits.unit == "messages" else limits.pause_s,
        # the message counts the zones change at, for this drain rate
        "lag_warn": bounds.warn,
        "lag_pause": bounds.pause,
    }
    if current == "nominal" and peak == 0:
        return Verdict(True, WARN, idle_text(limits), idle_metadata(metadata, limits))
    metadata["state"] = "active"
    figures = lag_figures(snapshot.lag, rate, limits)
    if current == "nominal":
        return Verdict(True, WARN, f"{figures}: nominal", metadata)
    return Verdict(
        False,
        WARN if current == "elevated" else ERROR,
        f"{figures}: {current.replace('_', ' ')}. {lag_advice(current, limits)}",
        metadata,
    )


#: Figures that only mean something while there is work: the drain rate and what derives
#: from it. An idle stream records none of them, so its plots show no sample instead of a
#: drop to 0 that reads like consumers that stopped.
RATE_FIGURES = ("drain_rate_per_s", "work_s", "peak_work_s")


def idle_metadata(metadata: dict[str, Any], limits: ZoneLimits) -> dict[str, Any]:
    """The figures of an idle stream (nothing published, nothing pending): ``state`` says
    ``idle``; the drain rate and, for limits in seconds of work, the message counts it
    turns them into are left out (the rate of an idle fleet is not a measurement)."""
    dropped = set(RATE_FIGURES)
    if limits.unit != "messages":
        dropped |= {"lag_warn", "lag_pause"}
    return {**{k: v for k, v in metadata.items() if k not in dropped}, "state": "idle"}


def idle_text(limits: ZoneLimits) -> str:
    """``idle: nothing to drain (warn 2 s, pause 10 s of work)``."""
    return f"idle: nothing to drain ({limits.describe()})"


def lag_figures(lag: int, rate: float | None, limits: ZoneLimits) -> str:
    """``lag 254 = 0.01 s of work at 18556 rows/s (warn 2 s, pause 10 s of work)``."""
    work = work_seconds(lag, rate)
    if rate is None and limits.unit == "messages":
        return f"lag {lag} ({limits.describe()}, {limits.in_flight} in flight)"
    if rate is None:
        drained = "drain rate not measured yet"
    elif rate <= 0:
        drained = "the consumers drained nothing lately"
    else:
        drained = f"{work:g} s of work at {rate:.0f} rows/s"
    climbing = ", a worker's limit still climbing" if limits.climbing else ""
    return f"lag {lag} = {drained} ({limits.describe()}, {limits.in_flight} in flight{climbing})"


#: What to do about a zone, short enough for an alert's one-line summary.
LAG_TODO = {
    "nominal": "nothing",
    "elevated": "nothing while it passes (producers are paced); if it lasts, add workers or "
    "raise SENTINEL_WORKER_CONCURRENCY",
    "backpressure": "check the workers (`sentinel status`), then add workers or raise "
    "SENTINEL_WORKER_CONCURRENCY; it resumes by itself at nominal",
    "worker_off": "start the workers (`sentinel up`); it resumes by itself at nominal",
}


#: The elevated zone's to-do while a worker's adaptive limit still climbs.
CLIMBING_TODO = "nothing: a worker's limit (auto) is still climbing from its start"


def lag_figures_short(lag: int, rate: float | None, limits: ZoneLimits) -> str:
    """``lag 1200 = 12 s of work at 100 rows/s (limits 2/10 s)``, for one-line alerts."""
    if limits.unit == "messages":
        return f"lag {lag} (limits {limits.lag_warn}/{limits.lag_pause} messages)"
    work = work_seconds(lag, rate)
    if rate is None:
        drained = "drain rate not measured"
    elif rate <= 0 or work is None:
        drained = "nothing drained lately"
    else:
        drained = f"{work:g} s of work at {rate:.0f} rows/s"
    return f"lag {lag} = {drained} (limits {limits.warn_s:g}/{limits.pause_s:g} s)"


def lag_advice(current: str, limits: ZoneLimits) -> str:
    """What the operator should do about a zone (the lag card, the alerts)."""
    if current == "worker_off":
        return (
            "No live worker: start the workers (`sentinel up`, or `python -m "
            "sentinel_platform.workers <stream>`); publishing is paused until they "
            "drain the backlog."
        )
    counts = (
        " Or, with Sentinel-L7's count limits set, check SENTINEL_LAG_WARN / "
        "SENTINEL_LAG_PAUSE against the fleet's speed (docs/backpressure.md)."
        if limits.unit == "messages"
        else ""
    )
    if current == "elevated" and limits.climbing:
        return (
            "A worker's limit (SENTINEL_WORKER_CONCURRENCY=auto) is still climbing from its "
            "start: it takes more messages at once with every round trip the downstream "
            "keeps up with. Nothing to do; producers are paced meanwhile."
        )
    if current == "elevated":
        return (
            "Producers are paced to the workers; nothing to do unless it lasts: then check "
            "the workers (`sentinel status`), add workers or raise "
            f"SENTINEL_WORKER_CONCURRENCY for I/O-bound processors.{counts}"
        )
    if current == "backpressure":
        return (
            "Publishing is paused until the backlog drains (it resumes by itself at "
            "nominal). Check the workers (`sentinel status`: stuck or dead consumers, dead "
            "letters, processor errors in the worker logs), then add workers or raise "
            f"SENTINEL_WORKER_CONCURRENCY if they are healthy but too slow.{counts}"
        )
    return "Nothing to do."


def evaluate_dead_letters(
    stream: str,
    recent_reasons: Sequence[str],
    depth: int,
    window_s: int = DLQ_WINDOW_S,
    error_count: int = DLQ_ERROR_COUNT,
) -> Verdict:
    recent = len(recent_reasons)
    metadata = {
        "recent_dead_letters": recent,
        "window_s": window_s,
        "dlq_depth": depth,
        "dlq_error_threshold": error_count,
        "by_reason": dict(Counter(recent_reasons)),
    }
    if recent == 0:
        return Verdict(True, WARN, f"no dead letters from {stream} in {window_s}s", metadata)
    text = f"{recent} dead letter(s) from {stream} in the last {window_s}s"
    return Verdict(False, ERROR if recent >= error_count else WARN, text, metadata)


def evaluate_delivery(anomalies: Anomalies) -> Verdict:
    metadata: dict[str, Any] = {
        **anomalies.figures(),
        "delivery_limit": anomalies.limit,
        "near_limit_ids": summarise(anomalies.near_limit)["ids"],
        "idle_ids": summarise(anomalies.idle)["ids"],
        "orphaned": anomalies.orphaned,
    }
    if not anomalies.any:
        return Verdict(True, WARN, f"{anomalies.pending_total} pending, none anomalous", metadata)
    parts = [
        f"{len(anomalies.near_limit)} near the delivery limit",
        f"{len(anomalies.idle)} idle past reclaim",
        f"{sum(anomalies.orphaned.values())} held by dead consumers",
    ]
    severe = bool(anomalies.over_limit) or (bool(anomalies.orphaned) and anomalies.live == 0)
    return Verdict(False, ERROR if severe else WARN, ", ".join(parts), metadata)


def evaluate_eviction(eviction: EvictionVerdict) -> Verdict:
    """The server's eviction policy as a check outcome: passes on ``noeviction`` and, with
    a note, when the server does not report it; fails with WARN where keys with a TTL
    (markers, leases) may be evicted or an ``allkeys-*`` policy is accepted by
    ``SENTINEL_ALLOW_EVICTING_SERVER``; with ERROR where any key may be, which workers and
    ``sentinel up`` refuse."""
    metadata = {
        "maxmemory_policy": eviction.policy or "not reported",
        "verdict": eviction.level,
        "accepted_by_setting": eviction.accepted,
    }
    if eviction.level == "ok":
        return Verdict(True, WARN, eviction.message, metadata)
    if eviction.level == "unknown":
        return Verdict(True, WARN, f"note: {eviction.message}", metadata)
    return Verdict(False, ERROR if eviction.refused else WARN, eviction.message, metadata)


def dead_letter_verdict(
    inspector: StreamInspector, settings: Settings, target: StreamTarget
) -> Verdict:
    keys = target.keys_of(settings)
    since_ms = int((time.time() - DLQ_WINDOW_S) * 1000)
    with inspector.client(settings) as client:
        entries = recent_dead_letters(client, keys.dlq, since_ms)
        depth = dlq_depth(client, keys.dlq)
    reasons = [e.reason for e in entries if e.stream == keys.stream]
    return evaluate_dead_letters(keys.stream, reasons, depth)


def _lag_check(target: StreamTarget) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=target.asset_key,
        name=LAG_CHECK,
        blocking=True,
        description="Consumer lag (backlog + pending) in seconds of work at the fleet's "
        "drain rate, past what the workers hold in flight: WARN from `SENTINEL_LAG_WARN_S`, "
        "ERROR from `SENTINEL_LAG_PAUSE_S` or with no live worker (Sentinel-L7's counts "
        "`SENTINEL_LAG_WARN`/`SENTINEL_LAG_PAUSE` instead when set; docs/backpressure.md). "
        "Blocking: the lag gate launches no publish run while it fails with ERROR. "
        "Evaluated by `consumer_lag_sensor`.",
    )
    def _check(
        settings: SettingsResource, stream_inspector: StreamInspector
    ) -> dg.AssetCheckResult:
        current = settings.load()
        with stream_inspector.client(current) as client:
            snapshot = lag_snapshot(client, target.keys_of(current))
        return evaluate_lag(snapshot, current).result()

    return _check


def _dlq_check(target: StreamTarget) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=target.asset_key,
        name=DLQ_CHECK,
        description=f"No new dead letters for this stream in the last {DLQ_WINDOW_S} s; "
        f"ERROR from {DLQ_ERROR_COUNT} (`dlq_error_threshold`). Evaluated by "
        "`dead_letter_queue_sensor`.",
    )
    def _check(
        settings: SettingsResource, stream_inspector: StreamInspector
    ) -> dg.AssetCheckResult:
        return dead_letter_verdict(stream_inspector, settings.load(), target).result()

    return _check


def _delivery_check(target: StreamTarget) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=target.asset_key,
        name=DELIVERY_CHECK,
        description="No pending message near the delivery limit, idle past "
        "`SENTINEL_RECLAIM_IDLE_MS`, or held by a consumer without a live lease. Evaluated "
        "by `delivery_anomaly_sensor`.",
    )
    def _check(
        settings: SettingsResource, stream_inspector: StreamInspector
    ) -> dg.AssetCheckResult:
        current = settings.load()
        with stream_inspector.client(current) as client:
            anomalies = find_anomalies(client, target.keys_of(current), current)
        return evaluate_delivery(anomalies).result()

    return _check


def _eviction_check(target: StreamTarget) -> dg.AssetChecksDefinition:
    @dg.asset_check(
        asset=target.asset_key,
        name=EVICTION_CHECK,
        description="The Redis server's `maxmemory-policy` (from `INFO memory`, every "
        "primary of a cluster) keeps this stream's keys: passes on `noeviction`; WARN on "
        "`volatile-*` (idempotency markers and leases may be evicted) or an `allkeys-*` "
        "accepted by `SENTINEL_ALLOW_EVICTING_SERVER`; ERROR on `allkeys-*` (the stream "
        "itself may be evicted; workers refuse to start); passes with a note when the "
        "server does not report it.",
    )
    def _check(
        settings: SettingsResource, stream_inspector: StreamInspector
    ) -> dg.AssetCheckResult:
        current = settings.load()
        with stream_inspector.client(current) as client:
            eviction = server_verdict(client, current.allow_evicting_server)
        return evaluate_eviction(eviction).result()

    return _check


def build_stream_health_checks(
    targets: Sequence[StreamTarget] | None = None,
) -> list[dg.AssetChecksDefinition]:
    """The four health checks for every stream asset (default: every declared stream)."""
    targets = stream_targets() if targets is None else targets
    return [
        factory(target)
        for target in targets
        for factory in (_lag_check, _dlq_check, _delivery_check, _eviction_check)
    ]


def build_checks_schedule(
    checks: Sequence[dg.AssetChecksDefinition],
    name: str = "stream_health_checks",
    cron: str = CHECKS_SCHEDULE_CRON,
) -> dg.ScheduleDefinition:
    """A schedule, running by default, of a job (``<name>_job``) that runs only the checks
    (not the assets); the schedule brings the job into the definitions."""
    job = dg.define_asset_job(
        name=f"{name}_job",
        selection=dg.AssetSelection.checks(*checks),
        description="Evaluate the stream-health checks without publishing anything.",
    )
    schedule = dg.ScheduleDefinition(
        name=f"{name}_schedule",
        job=job,
        cron_schedule=cron,
        default_status=dg.DefaultScheduleStatus.RUNNING,
    )
    return schedule
