"""The lag check's verdict and the words for it: the lag card, its alerts, its advice.

Zones as everywhere (:mod:`~sentinel_platform.streams.backlog.zones`): seconds of work at
the fleet's drain rate past what the live workers hold in flight, or Sentinel-L7's counts
when set. Severity follows the lag card: WARN while elevated and under backpressure (the
gate pauses the producers and resumes them by itself: the platform working as designed, so
a checks run stays a successful run and raises no run-failure alert), ERROR with no live
worker (only an operator ends that). Both stop publishing (:attr:`Verdict.blocks`).
A stream with nothing published and nothing pending is *idle*: its
check says ``idle: nothing to drain`` and its figures carry no drain rate
(:func:`idle_metadata`), since the rate of an idle fleet is not a measurement. The check,
the lag sensor and its alerts all word a zone from here, so they never disagree. Where
the analyzer's capacity limits the drain
(:mod:`~sentinel_platform.domains.operations.lag_analyzer`), the advice names it instead
of advising more workers.
"""

from __future__ import annotations

from typing import Any

from sentinel_platform.domains.operations.check_verdict import ERROR, WARN, Verdict
from sentinel_platform.domains.operations.lag_analyzer import (
    ADVISED_ZONES,
    AnalyzerBound,
    analyzer_advice,
)
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.peaks import Peaks
from sentinel_platform.streams.backlog.zones import (
    ZoneLimits,
    limits_from_settings,
    thresholds,
    work_seconds,
    zone,
)
from sentinel_platform.streams.operators.group_view import LagSnapshot

ZONE_LEVEL = {"nominal": 0, "elevated": 1, "backpressure": 2, "worker_off": 3}
#: The zones in which the lag gate launches no publish run.
PAUSING_ZONES = frozenset({"backpressure", "worker_off"})


def evaluate_lag(
    snapshot: LagSnapshot,
    settings: Settings,
    peaks: Peaks | None = None,
    analyzer: AnalyzerBound | None = None,
) -> Verdict:
    """The lag card now; ``peaks`` (what workers and producers saw since the last tick) adds
    the highest lag and the backpressure episodes in between, so a short spike is recorded
    even when the current lag is back to normal. The verdict itself is about the present.
    ``analyzer``: the analyzer limits the drain, which the advice names
    (``limited_by_analyzer`` in the figures).

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
    # a sharded stream's lag, shard by shard: the one stream's breakdown
    metadata.update({f"shard_{k}_lag": lag for k, lag in enumerate(snapshot.shard_lags)})
    if current == "nominal" and peak == 0:
        return Verdict(True, WARN, idle_text(limits), idle_metadata(metadata, limits))
    metadata["state"] = "active"
    if analyzer is not None and current in ADVISED_ZONES:
        metadata["limited_by_analyzer"] = analyzer.kind
    figures = lag_figures(snapshot.lag, rate, limits)
    if current == "nominal":
        return Verdict(True, WARN, f"{figures}: nominal", metadata)
    return Verdict(
        False,
        ERROR if current == "worker_off" else WARN,
        f"{figures}: {current.replace('_', ' ')}. {lag_advice(current, limits, analyzer)}",
        metadata,
        stops_publishing=current in PAUSING_ZONES,
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


def lag_advice(current: str, limits: ZoneLimits, analyzer: AnalyzerBound | None = None) -> str:
    """What the operator should do about a zone (the lag card, the alerts); with
    ``analyzer``, pressure the analyzer's capacity explains is advised about as such."""
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
    if analyzer is not None and current in ADVISED_ZONES and not limits.climbing:
        return analyzer_advice(current, analyzer)
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
