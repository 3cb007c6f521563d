"""The consumer-lag sensor: records lag, pauses and resumes publishing, alerts on zone changes.

A thin shell around the pure gate in :mod:`lag_gate_policy`, which holds every rule (when
to pause, what is held back, when to resume and what to relaunch, when to record and
alert) and documents the cursor. Every tick, per stream, the shell:

1. reads: the lag card (worker key, else the group's own backlog) and the lag check's
   verdict, the lag peaks and backpressure episodes since the last tick (taken, i.e. read
   and reset, see :mod:`sentinel_platform.streams.backlog.peaks`), the pause flag, the due and
   materialised partitions, and the publish runs that failed during a pause ending now;
2. steps the policy with the state kept in the cursor;
3. applies the actions: the ``AssetObservation`` on the stream asset with the
   ``consumer_lag_within_limits`` evaluation (it names the materialisation it is about, so
   the UI's "latest execution" of the check is exact), the pause flag (set with a TTL or
   cleared), the ``RunRequest`` s and the alerts;
4. stores the new state in the cursor.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

import dagster as dg

from sentinel_platform.domains.operations.check_verdict import (
    MaterializationTarget,
    Verdict,
    latest_materialization,
)
from sentinel_platform.domains.operations.cursor import dump_cursor
from sentinel_platform.domains.operations.lag_alerts import spike_alert, zone_alert
from sentinel_platform.domains.operations.lag_analyzer import (
    ADVISED_ZONES,
    AnalyzerBound,
    read_analyzer_bound,
)
from sentinel_platform.domains.operations.lag_batch import with_batch_lane
from sentinel_platform.domains.operations.lag_gate_policy import (
    Action,
    ClearPauseFlag,
    LagCard,
    Launch,
    Observation,
    RecordObservation,
    SetPauseFlag,
    SpikeAlert,
    ZoneAlert,
    episode_start_ms,
    episode_to_resume,
    step,
)
from sentinel_platform.domains.operations.lag_gate_state import GateState
from sentinel_platform.domains.operations.lag_verdict import evaluate_lag
from sentinel_platform.domains.operations.sensor_shell import SensorTick, operations_sensor
from sentinel_platform.domains.operations.stream_health import LAG_CHECK
from sentinel_platform.domains.operations.targets import PublishTarget, StreamTarget, stream_targets
from sentinel_platform.resources.alerts import AlertSink
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.drain import card_rate
from sentinel_platform.streams.backlog.peaks import take_peaks
from sentinel_platform.streams.backlog.progress import progress, summed
from sentinel_platform.streams.backlog.retention import retained_entries
from sentinel_platform.streams.operators.group_view import LagSnapshot, stream_snapshot
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform.streams.plumbing.replies import optional_text
from sentinel_platform.streams.sharding.shards import recorded_keys

SENSOR_NAME = "consumer_lag_sensor"
INTERVAL_S = 15
#: Most failed runs looked at when a pause ends.
FAILED_RUNS_CAP = 50
#: Hex digits of the figures' digest kept in the cursor.
FIGURES_DIGEST_CHARS = 16

Clock = Callable[[], datetime]


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class Tick:
    """What every stream's tick shares: where to read, where to alert, and when it is."""

    client: RedisClient
    settings: Settings
    instance: dg.DagsterInstance
    alerts: AlertSink
    now: datetime


@dataclass(frozen=True)
class StreamRead:
    """What one tick read about one stream: the policy's observation, and the figures the
    shell renders into events and alerts."""

    observation: Observation
    snapshot: LagSnapshot
    verdict: Verdict
    target: MaterializationTarget
    processed: int | None
    #: the analyzer limits the drain (read only for a stream under pressure)
    analyzer: AnalyzerBound | None = None


@dataclass
class TickOutcome:
    events: list[dg.AssetObservation | dg.AssetCheckEvaluation] = field(default_factory=list)
    runs: list[dg.RunRequest] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def lag_card(verdict: Verdict, target: MaterializationTarget) -> LagCard:
    """The verdict as the policy sees it; ``figures`` (a digest) covers the materialisation
    too, so a new materialisation is recorded as a change."""
    meta = verdict.metadata
    return LagCard(
        zone=meta["zone"],
        lag=int(meta["lag"]),
        lag_peak=int(meta["lag_peak"]),
        peak_zone=meta["peak_zone"],
        hard_episodes=int(meta["hard_backpressure_episodes"]),
        soft_episodes=int(meta["soft_backpressure_episodes"]),
        blocks=verdict.blocks,
        climbing=bool(meta.get("limit_climbing")),
        figures=figures_digest({**meta, "target": target.storage_id if target else None}),
    )


def figures_digest(figures: Mapping[str, Any]) -> str:
    """A short digest of the recorded figures: enough to tell a change, small enough that
    the cursor stays readable on the sensor's page (the figures are in the observation)."""
    return hashlib.sha256(dump_cursor(dict(figures)).encode()).hexdigest()[:FIGURES_DIGEST_CHARS]


def due_partition(target: PublishTarget, now: datetime, instance: dg.DagsterInstance) -> str | None:
    """The newest partition whose window has closed, if the gate launches new partitions."""
    if target.partitions_def is None or not target.launch_due_partitions:
        return None
    keys = target.partitions_def.get_partition_keys(
        current_time=now, dynamic_partitions_store=instance
    )
    return keys[-1] if keys else None


def failed_during(
    instance: dg.DagsterInstance, target: PublishTarget, stream: StreamTarget, episode: str | None
) -> list[str]:
    """Partitions whose publish run for this stream failed during the pause episode.

    A run caught by the pause waits on the flag and fails once it has waited longer than
    ``SENTINEL_MAX_PAUSE_S``; its partition was held back as surely as one never launched.
    """
    started_ms = episode_start_ms(episode)
    if started_ms is None:
        return []
    runs = instance.get_runs(
        filters=dg.RunsFilter(
            job_name=target.job_name,
            statuses=[dg.DagsterRunStatus.FAILURE],
            tags={"sentinel/stream": stream.name},
            updated_after=datetime.fromtimestamp(started_ms / 1000, tz=UTC),
        ),
        limit=FAILED_RUNS_CAP,
    )
    partitions = (run.tags.get("dagster/partition") for run in runs)
    return sorted({p for p in partitions if p})


def read_stream(
    tick: Tick, stream: StreamTarget, publish: PublishTarget | None, state: GateState
) -> StreamRead:
    """Everything one stream's tick decides on, read from Redis and the Dagster instance."""
    client, instance, settings = tick.client, tick.instance, tick.settings
    keys = stream.keys_of(settings)
    # also samples for `sentinel status` rates; a sharded stream's work is its shards'
    done = summed([progress(client, part) for part in recorded_keys(client, settings, stream.spec)])
    processed = done.processed
    snapshot = stream_snapshot(client, settings, stream.spec)
    # the producers' drain rate; without one, 0 if the group read nothing for a minute
    snapshot = replace(snapshot, drain_rate=card_rate(snapshot.drain_rate, done.rate_per_s))
    peaks = take_peaks(client, keys)
    verdict = evaluate_lag(snapshot, settings, peaks)
    analyzer = None
    if verdict.metadata["zone"] in ADVISED_ZONES or verdict.metadata["hard_backpressure_episodes"]:
        analyzer = read_analyzer_bound(client, stream.name, keys, settings, snapshot.drain_rate)
        verdict = evaluate_lag(snapshot, settings, peaks, analyzer)
    target = latest_materialization(instance, stream.asset_key)
    card = lag_card(verdict, target)
    # shown beside the lag once the card is made: the batch lane never moves the gate
    verdict = with_batch_lane(verdict, client, settings, stream.spec)
    flag = optional_text(client.get(keys.paused))
    observation = Observation(
        stream=stream.name,
        card=card,
        now_s=tick.now.timestamp(),
        wall_ms=int(time.time() * 1000),
        record_every_s=settings.observation_max_interval_s,
        flag=flag,
    )
    if publish is not None:
        ending = episode_to_resume(state, flag, card.zone)
        observation = replace(
            observation,
            publishes=True,
            due=due_partition(publish, tick.now, instance),
            materialised=frozenset(instance.get_materialized_partitions(stream.asset_key)),
            failed=tuple(failed_during(instance, publish, stream, ending)),
        )
    return StreamRead(observation, snapshot, verdict, target, processed, analyzer)


def apply(
    tick: Tick,
    stream: StreamTarget,
    publish: PublishTarget | None,
    read: StreamRead,
    actions: Sequence[Action],
) -> TickOutcome:
    """Carry the policy's actions out in the order it gave them; launches become run
    requests of the tick."""
    keys = stream.keys_of(tick.settings)
    out = TickOutcome()
    for action in actions:
        if isinstance(action, RecordObservation):
            out.events.extend(_recorded(tick.client, keys, stream, read))
        elif isinstance(action, SetPauseFlag):
            tick.client.set(keys.paused, action.value, ex=action.ttl_s)
        elif isinstance(action, ClearPauseFlag):
            _clear_flag(tick.client, keys, action.expected)
        elif isinstance(action, Launch) and publish is not None:
            out.runs.append(_run_request(stream, publish, action))
        elif isinstance(action, SpikeAlert):
            tick.alerts.send(
                spike_alert(
                    SENSOR_NAME, stream, keys, action, read.verdict, tick.settings, read.analyzer
                )
            )
        elif isinstance(action, ZoneAlert):
            tick.alerts.send(
                zone_alert(
                    SENSOR_NAME, stream, keys, action, read.snapshot, tick.settings, read.analyzer
                )
            )
    return out


def tick_stream(
    tick: Tick, stream: StreamTarget, publish: PublishTarget | None, state: GateState
) -> tuple[GateState, TickOutcome]:
    """One stream's tick: read, step the policy, apply what it decided."""
    read = read_stream(tick, stream, publish, state)
    state, actions = step(state, read.observation)
    out = apply(tick, stream, publish, read, actions)
    out.notes.append(_note(stream, state, read))
    return state, out


def _recorded(
    client: RedisClient, keys: StreamKeys, stream: StreamTarget, read: StreamRead
) -> list[dg.AssetObservation | dg.AssetCheckEvaluation]:
    extra = {} if read.processed is None else {"entries_processed": read.processed}
    extra["entries_retained"] = retained_entries(client, keys)  # see streams/retention.py
    metadata = {**read.verdict.metadata, **extra}
    return [
        dg.AssetObservation(asset_key=stream.asset_key, metadata=metadata),
        read.verdict.evaluation(stream.asset_key, LAG_CHECK, blocking=True, target=read.target),
    ]


def _clear_flag(client: RedisClient, keys: StreamKeys, expected: str) -> None:
    """Delete the flag only if it still holds this sensor's value: an operator's stays."""
    if optional_text(client.get(keys.paused)) == expected:
        client.delete(keys.paused)


def _run_request(stream: StreamTarget, target: PublishTarget, launch: Launch) -> dg.RunRequest:
    return dg.RunRequest(
        run_key=launch.run_key,
        job_name=target.job_name,
        partition_key=launch.partition,
        asset_selection=list(target.asset_selection) if target.asset_selection else None,
        tags={
            "sentinel/stream": stream.name,
            "sentinel/launched_by": f"{SENSOR_NAME}:{launch.reason}",
        },
    )


def _note(stream: StreamTarget, state: GateState, read: StreamRead) -> str:
    """One line of the tick's skip reason: zone, lag, peak, pause and held partitions."""
    lag, peak = read.snapshot.lag, read.observation.card.lag_peak
    held = f", {len(state.held)} partition(s) held" if state.held else ""
    paused = f", paused since episode {state.episode}" if state.paused else ""
    peaked = f", peak {peak}" if peak > lag else ""
    work = read.verdict.metadata.get("work_s")
    seconds = f" = {work:g} s of work" if work is not None and lag else ""
    idle = read.verdict.metadata.get("state") == "idle"
    zone = "idle" if idle else read.observation.card.zone
    return f"{stream.name}: {zone} (lag {lag}{seconds}{peaked}){paused}{held}"


def build_lag_sensor(
    streams: Sequence[StreamTarget] | None = None,
    publish: Mapping[str, PublishTarget] | None = None,
    clock: Clock = _utc_now,
    name: str = SENSOR_NAME,
    interval_s: int = INTERVAL_S,
) -> dg.SensorDefinition:
    """The lag gate for ``streams`` (default: every declared stream); ``publish`` maps a
    stream name to the job it may launch."""
    streams = stream_targets() if streams is None else streams
    publish = dict(publish or {})
    jobs = list({target.job_name: target.job for target in publish.values()}.values())

    @operations_sensor(
        name,
        interval_s,
        "Records consumer lag and its peak since the last tick per stream (on "
        "change, at least every `SENTINEL_OBSERVATION_MAX_INTERVAL_S`), pauses publishing "
        "under backpressure or with no live worker, resumes held partitions at nominal, "
        "alerts on zone changes and hard backpressure episodes.",
        jobs=jobs or None,
    )
    def _sensor(sensor_tick: SensorTick) -> dg.SensorResult:
        states = sensor_tick.cursor.get("streams", {})
        if not isinstance(states, dict):
            states = {}
        events: list[Any] = []
        runs: list[dg.RunRequest] = []
        notes: list[str] = []
        current = sensor_tick.settings
        with sensor_tick.client() as client:
            instance = sensor_tick.context.instance
            tick = Tick(client, current, instance, sensor_tick.alerts, clock())
            for stream in streams:
                state = GateState.from_json(states.get(stream.name))
                state, outcome = tick_stream(tick, stream, publish.get(stream.name), state)
                states[stream.name] = state.to_json()
                events.extend(outcome.events)
                runs.extend(outcome.runs)
                notes.extend(outcome.notes)
        new_cursor = dump_cursor({"streams": states})
        if runs:
            return dg.SensorResult(run_requests=runs, cursor=new_cursor, asset_events=events)
        return dg.SensorResult(
            skip_reason=dg.SkipReason("no publish run to launch: " + "; ".join(notes)),
            cursor=new_cursor,
            asset_events=events,
        )

    return _sensor
