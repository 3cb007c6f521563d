"""Stream-health asset checks on each stream asset: lag, dead letters, delivery counts, and
whether the Redis server may evict the stream's keys (``maxmemory-policy``).

The verdicts are plain functions (``evaluate_*``; the lag's in
:mod:`~sentinel_platform.domains.operations.lag_verdict`) shared by the checks, which run on a
schedule or from the UI, and by the sensors; the lag sensor evaluates the lag check before it
launches any publish run and records the result as an ``AssetCheckEvaluation``
(:class:`~sentinel_platform.domains.operations.check_verdict.Verdict`). That is how a failing
blocking check keeps the publish job from starting: the only automatic launcher of publish
runs is the lag gate, and it launches nothing while ``consumer_lag_within_limits`` says
backpressure (a WARN: a checks run under backpressure is no failed run) or no live worker
(an ERROR; see :mod:`~sentinel_platform.domains.operations.lag_gate`).
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import dagster as dg

from sentinel_platform.domains.operations.ai_health import CHECK_NAME, judge
from sentinel_platform.domains.operations.ai_health_read import read_figures
from sentinel_platform.domains.operations.anomalies import (
    Anomalies,
    find_anomalies,
    summarise,
)
from sentinel_platform.domains.operations.check_verdict import ERROR, WARN, Verdict
from sentinel_platform.domains.operations.lag_analyzer import (
    ADVISED_ZONES,
    analyzer_explains_wait,
    read_analyzer_bound,
)
from sentinel_platform.domains.operations.lag_batch import with_batch_lane
from sentinel_platform.domains.operations.lag_verdict import evaluate_lag
from sentinel_platform.domains.operations.targets import StreamTarget, stream_targets
from sentinel_platform.resources.settings import SettingsResource
from sentinel_platform.resources.stream_inspector import StreamInspector
from sentinel_platform.settings import Settings
from sentinel_platform.streams.operators.group_view import (
    dlq_depth,
    recent_dead_letters,
    stream_snapshot,
)
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.eviction_policy import EvictionVerdict, server_verdict

LAG_CHECK = "consumer_lag_within_limits"
DLQ_CHECK = "dead_letter_queue_not_growing"
DELIVERY_CHECK = "no_delivery_count_anomalies"
EVICTION_CHECK = "redis_does_not_evict_stream_keys"
AI_CHECK = CHECK_NAME
#: Dead letters counted as "recent" by the DLQ check.
DLQ_WINDOW_S = 900
#: That many recent dead letters of one stream make the DLQ check an ERROR.
DLQ_ERROR_COUNT = 10
CHECKS_SCHEDULE_CRON = "*/5 * * * *"


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
        return Verdict(
            True,
            WARN,
            f"{anomalies.pending_total} pending, none anomalous{_waits(anomalies)}",
            metadata,
        )
    parts = [
        f"{len(anomalies.near_limit)} near the delivery limit",
        f"{len(anomalies.idle)} idle past reclaim",
        f"{sum(anomalies.orphaned.values())} held by dead consumers",
    ]
    severe = bool(anomalies.over_limit) or (bool(anomalies.orphaned) and anomalies.live == 0)
    return Verdict(False, ERROR if severe else WARN, ", ".join(parts), metadata)


def _waits(anomalies: Anomalies) -> str:
    """The waits by design among the pending: ``(3 handed back at a stop, ...)``."""
    parts = []
    if anomalies.handed_back:
        parts.append(f"{anomalies.handed_back} handed back at a stop, for the next worker")
    if anomalies.waiting_on_analyzer:
        parts.append(f"{anomalies.waiting_on_analyzer} idle waiting for the analyzer")
    return f" ({'; '.join(parts)})" if parts else ""


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


#: How a check reads its verdict: from one Redis connection, the current settings and
#: the stream it checks.
VerdictRead = Callable[[RedisClient, Settings, StreamTarget], Verdict]


def _redis_check(
    target: StreamTarget, name: str, description: str, read: VerdictRead, blocking: bool = False
) -> dg.AssetChecksDefinition:
    """A check on ``target``'s asset whose verdict ``read`` makes over one connection of
    the ``stream_inspector`` resource with the settings of the moment, so every check
    reads its resources the same way (the settings reloaded on each evaluation)."""

    @dg.asset_check(asset=target.asset_key, name=name, blocking=blocking, description=description)
    def _check(
        settings: SettingsResource, stream_inspector: StreamInspector
    ) -> dg.AssetCheckResult:
        current = settings.load()
        with stream_inspector.client(current) as client:
            verdict = read(client, current, target)
        return verdict.result()

    return _check


def _lag_verdict(client: RedisClient, current: Settings, target: StreamTarget) -> Verdict:
    """The lag at the fleet's drain rate; in a zone the analyzer's limits may explain,
    judged again with the analyzer's bound; the batch lane beside it, never judged."""
    snapshot = stream_snapshot(client, current, target.spec)
    verdict = evaluate_lag(snapshot, current)
    if verdict.metadata["zone"] in ADVISED_ZONES:
        keys = target.keys_of(current)
        bound = read_analyzer_bound(client, target.name, keys, current, snapshot.drain_rate)
        verdict = evaluate_lag(snapshot, current, analyzer=bound)
    return with_batch_lane(verdict, client, current, target.spec)


def _delivery_verdict(client: RedisClient, current: Settings, target: StreamTarget) -> Verdict:
    keys = target.keys_of(current)
    waits = partial(analyzer_explains_wait, client, target.name, keys, current)
    return evaluate_delivery(find_anomalies(client, keys, current, analyzer_waits=waits))


def _eviction_verdict(client: RedisClient, current: Settings, target: StreamTarget) -> Verdict:
    return evaluate_eviction(server_verdict(client, current.allow_evicting_server))


def _ai_verdict(client: RedisClient, current: Settings, target: StreamTarget) -> Verdict:
    return judge(read_figures(client, target.name, target.keys_of(current), current))


def _lag_check(target: StreamTarget) -> dg.AssetChecksDefinition:
    return _redis_check(
        target,
        LAG_CHECK,
        "Consumer lag (backlog + pending) in seconds of work at the fleet's "
        "drain rate, past what the workers hold in flight: WARN from `SENTINEL_LAG_WARN_S` "
        "and under backpressure from `SENTINEL_LAG_PAUSE_S`, ERROR with no live worker "
        "(Sentinel-L7's counts `SENTINEL_LAG_WARN`/`SENTINEL_LAG_PAUSE` instead when set; "
        "docs/backpressure.md). Blocking: the lag gate launches no publish run under "
        "backpressure or with no live worker. The batch lane (`batch_*`: messages waiting "
        "for a provider's batch or at the provider) is shown, never lag; `batch_overdue` "
        "says a batch past its 24 h completion window. "
        "Evaluated by `consumer_lag_sensor`.",
        _lag_verdict,
        blocking=True,
    )


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
    return _redis_check(
        target,
        DELIVERY_CHECK,
        "No pending message near the delivery limit, idle past "
        "`SENTINEL_RECLAIM_IDLE_MS` (unless the analyzer's limits explain the wait), or held "
        "by a "
        "consumer without a live lease. Messages a stopping worker handed back are counted "
        "apart (`handed_back`). Evaluated by `delivery_anomaly_sensor`.",
        _delivery_verdict,
    )


def _eviction_check(target: StreamTarget) -> dg.AssetChecksDefinition:
    return _redis_check(
        target,
        EVICTION_CHECK,
        "The Redis server's `maxmemory-policy` (from `INFO memory`, every "
        "primary of a cluster) keeps this stream's keys: passes on `noeviction`; WARN on "
        "`volatile-*` (idempotency markers and leases may be evicted) or an `allkeys-*` "
        "accepted by `SENTINEL_ALLOW_EVICTING_SERVER`; ERROR on `allkeys-*` (the stream "
        "itself may be evicted; workers refuse to start); passes with a note when the "
        "server does not report it.",
        _eviction_verdict,
    )


def _ai_check(target: StreamTarget) -> dg.AssetChecksDefinition:
    return _redis_check(
        target,
        AI_CHECK,
        "The AI's health on this stream: the share of the last 5 minutes' "
        "verdicts the model made (the demo's left out), the fallbacks by cause, the "
        "analyzer's holds and the provisional verdicts waiting for re-screening. ERROR when "
        "most verdicts were fallbacks, an analyzer is exhausted or a provisional verdict "
        "waited over an hour; WARN from 10% fallbacks, on another standing hold or "
        "provisional verdicts piling up. Evaluated by `ai_health_sensor`.",
        _ai_verdict,
    )


def build_stream_health_checks(
    targets: Sequence[StreamTarget] | None = None,
) -> list[dg.AssetChecksDefinition]:
    """The health checks for every stream asset (default: every declared stream)."""
    targets = stream_targets() if targets is None else targets
    return [
        factory(target)
        for target in targets
        for factory in (_lag_check, _dlq_check, _delivery_check, _eviction_check, _ai_check)
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
