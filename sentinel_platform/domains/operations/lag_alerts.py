"""What the lag gate tells an operator: a change of lag zone, and a spike between ticks.

Each alert is one line an operator can act on (the zone or peak, the figures in the
limits' own unit, what the gate did, what to do) with the advice and every figure in its
details; the words come from :mod:`~sentinel_platform.domains.operations.lag_verdict`, as
the lag check's do, so the alert and the check never disagree. When to send one is the
policy's decision (:class:`~sentinel_platform.domains.operations.lag_gate_policy.ZoneAlert`,
:class:`~sentinel_platform.domains.operations.lag_gate_policy.SpikeAlert`); ``source`` names
the sensor that sends it.
"""

from __future__ import annotations

from sentinel_platform.alerting.model import Alert
from sentinel_platform.domains.operations.check_verdict import Verdict
from sentinel_platform.domains.operations.lag_analyzer import ADVISED_ZONES, AnalyzerBound
from sentinel_platform.domains.operations.lag_gate_policy import SpikeAlert, ZoneAlert
from sentinel_platform.domains.operations.lag_verdict import (
    CLIMBING_TODO,
    LAG_TODO,
    lag_advice,
    lag_figures,
    lag_figures_short,
)
from sentinel_platform.domains.operations.targets import StreamTarget
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.zones import limits_from_settings, work_seconds
from sentinel_platform.streams.operators.group_view import LagSnapshot
from sentinel_platform.streams.plumbing.keys import StreamKeys


def zone_alert(
    source: str,
    stream: StreamTarget,
    keys: StreamKeys,
    decided: ZoneAlert,
    snapshot: LagSnapshot,
    settings: Settings,
    analyzer: AnalyzerBound | None = None,
) -> Alert:
    """A change of lag zone: the figures, what the gate did and what to do, in one line;
    the advice and every figure in the details. ``analyzer``: the analyzer's capacity
    limits the drain, so the to-do names it instead of more workers."""
    what = {
        "pause": "producers paused, no new publish runs",
        "resume": f"producers resumed, {len(decided.relaunched)} held partition(s) relaunched",
    }.get(decided.action or "", "no publish action")
    limits = limits_from_settings(settings, snapshot.allowance, snapshot.climbing)
    figures = lag_figures_short(snapshot.lag, snapshot.drain_rate, limits)
    climbing = limits.climbing and decided.zone == "elevated"
    todo = CLIMBING_TODO if climbing else LAG_TODO[decided.zone]
    if analyzer is not None and not climbing and decided.zone in ADVISED_ZONES:
        todo = analyzer.todo
    return Alert(
        severity=decided.severity,
        source=source,
        stream=keys.stream,
        condition=decided.condition,
        summary=f"lag zone {decided.previous or 'unknown'} -> {decided.zone}: {figures}; "
        f"{what}. To do: {todo}",
        details={
            "advice": lag_advice(decided.zone, limits, analyzer),
            "limited_by_analyzer": analyzer.kind if analyzer else None,
            "figures": lag_figures(snapshot.lag, snapshot.drain_rate, limits),
            "pause_flag": keys.paused,
            "stream_name": stream.name,
            "previous_zone": decided.previous,
            "zone": decided.zone,
            "lag": snapshot.lag,
            "work_s": work_seconds(snapshot.lag, snapshot.drain_rate),
            "drain_rate_per_s": snapshot.drain_rate,
            "pending": snapshot.reading.pending,
            "backlog": snapshot.reading.backlog,
            "consumers_alive": snapshot.consumers_alive,
            "action": decided.action,
            "episode": decided.episode,
            "relaunched_partitions": list(decided.relaunched),
        },
    )


def spike_alert(
    source: str,
    stream: StreamTarget,
    keys: StreamKeys,
    decided: SpikeAlert,
    verdict: Verdict,
    settings: Settings,
    analyzer: AnalyzerBound | None = None,
) -> Alert:
    """Producers waited (hard backpressure episodes) since the last tick, although the
    lag may be back to normal now: the peak, in the limits' unit, and what to do (the
    analyzer's limit when ``analyzer`` says it limits the drain, else the workers)."""
    meta = verdict.metadata
    hard = int(meta["hard_backpressure_episodes"])
    todo = (
        "if it recurs, check the workers (`sentinel status`), add workers or raise "
        "SENTINEL_WORKER_CONCURRENCY"
    )
    advice = (
        "Producers waited for the workers. If it recurs, check the workers (`sentinel "
        "status`: dead consumers, dead letters, processor errors), then add workers or "
        "raise SENTINEL_WORKER_CONCURRENCY (docs/backpressure.md)."
    )
    if analyzer is not None:
        todo = analyzer.todo
        advice = f"Producers waited for the analyzer. {analyzer.advice}"
    peak_work = meta.get("peak_work_s")
    if meta["limits_unit"] == "messages":  # Sentinel-L7's wording, in its unit
        work, limit = "", f"pause limit {meta['lag_pause']}"
    else:
        work = "" if peak_work is None else f" = {peak_work:g} s of work"
        limit = f"pause limit {meta['lag_pause_s']:g} s of work"
    return Alert(
        severity=decided.severity,
        source=source,
        stream=keys.stream,
        condition=decided.condition,
        summary=f"lag peaked at {meta['lag_peak']}{work} ({limit}) since the last check, "
        f"{hard} hard backpressure episode(s); lag now {meta['lag']}. To do: {todo}",
        details={
            "advice": advice,
            "limited_by_analyzer": analyzer.kind if analyzer else None,
            "stream_name": stream.name,
            "lag_peak": meta["lag_peak"],
            "peak_work_s": peak_work,
            "lag": meta["lag"],
            "hard_backpressure_episodes": hard,
            "soft_backpressure_episodes": meta["soft_backpressure_episodes"],
            "lag_pause": meta.get("lag_pause"),
            "lag_pause_s": meta["lag_pause_s"],
            "drain_rate_per_s": meta.get("drain_rate_per_s"),
        },
    )
