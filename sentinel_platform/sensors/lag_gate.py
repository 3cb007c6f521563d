"""The consumer-lag sensor: records lag, pauses and resumes publishing, alerts on zone changes.

Every tick, per stream: read the lag card (worker key, else the group's own backlog),
record an ``AssetObservation`` on the stream asset and the ``consumer_lag_within_limits``
evaluation, then drive a small state machine kept in the cursor:

- entering backpressure or worker off starts a *pause episode*: the producer-pause flag
  is set (in-flight publish runs wait on it) and no publish run is launched;
- partitions that come due during the episode are *held back* in the cursor, and so
  are those whose publish run failed during it (a run waiting on the flag gives up
  after ``SENTINEL_MAX_PAUSE_S``);
- only back at nominal (not merely elevated: hysteresis against the on/off sawtooth)
  does the episode end: the flag is cleared and each held partition is launched once
  with run key ``resume:<stream>:<partition>:<episode>``; the episode id is the pause
  start in ms, so two episodes never share a key and a replayed tick cannot launch twice.

Between ticks, workers and producers keep the stream's lag high-water mark and its
backpressure episodes in Redis (:mod:`sentinel_platform.streams.peaks`); each tick takes
them (read and reset) and records ``lag_peak`` next to ``lag``, so a two-second spike is
on the plot. A hard backpressure episode, or a peak in the backpressure zone, raises one
alert (the cool-down keeps a flapping producer from paging every tick).

To keep the Events list readable, the observation and the check evaluations are recorded
when something changed (figures, zone, the materialisation they are about), whenever a
peak rose above the current lag, and otherwise at least every
``SENTINEL_OBSERVATION_MAX_INTERVAL_S``. Each evaluation names the materialisation it
is about, so the UI's "latest execution" of the check is exact.

Outside a pause the gate launches each newly due partition once (run key
``publish:<stream>:<partition>``) unless it is already materialised. The flag carries
a TTL refreshed every tick, so a stopped sensor cannot pause producers forever (their
own lag guard still protects the stream).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import dagster as dg

from sentinel_platform.alerting.model import Alert
from sentinel_platform.checks.stream_health import (
    LAG_CHECK,
    PAUSE_ZONES,
    MaterializationTarget,
    Verdict,
    evaluate_lag,
    latest_materialization,
)
from sentinel_platform.resources.alerts import AlertSink
from sentinel_platform.resources.stream_inspector import StreamInspector
from sentinel_platform.sensors.cursor import dump_cursor, load_cursor
from sentinel_platform.sensors.targets import STREAM_TARGETS, PublishTarget, StreamTarget
from sentinel_platform.settings import Settings
from sentinel_platform.streams.connection import RedisClient
from sentinel_platform.streams.inspect import LagSnapshot, lag_snapshot
from sentinel_platform.streams.keys import StreamKeys
from sentinel_platform.streams.peaks import take_peaks
from sentinel_platform.streams.progress import progress
from sentinel_platform.streams.retention import retained_entries

SENSOR_NAME = "consumer_lag_sensor"
INTERVAL_S = 15
#: The pause flag outlives many ticks but not a dead sensor by long.
PAUSE_FLAG_TTL_S = 3600
#: Most failed runs looked at when a pause ends.
FAILED_RUNS_CAP = 50
FLAG_PREFIX = "sensor:"
ZONE_SEVERITY = {
    "nominal": "info",
    "elevated": "warning",
    "backpressure": "error",
    "worker_off": "error",
}

Clock = Callable[[], datetime]


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass
class GateState:
    """Per-stream memory, round-tripped through the JSON cursor."""

    zone: str | None = None
    paused: bool = False
    episode: str | None = None
    held: list[str] = field(default_factory=list)
    last_due: str | None = None
    observed: str | None = None
    observed_at: float | None = None

    @classmethod
    def from_json(cls, raw: Mapping[str, Any] | None) -> GateState:
        raw = raw or {}
        return cls(
            zone=raw.get("zone"),
            paused=bool(raw.get("paused", False)),
            episode=raw.get("episode"),
            held=list(raw.get("held", [])),
            last_due=raw.get("last_due"),
            observed=raw.get("observed"),
            observed_at=raw.get("observed_at"),
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "zone": self.zone,
            "paused": self.paused,
            "episode": self.episode,
            "held": self.held,
            "last_due": self.last_due,
            "observed": self.observed,
            "observed_at": self.observed_at,
        }


@dataclass
class TickOutcome:
    events: list[dg.AssetObservation | dg.AssetCheckEvaluation] = field(default_factory=list)
    runs: list[dg.RunRequest] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def spiked(verdict: Verdict) -> bool:
    """A peak above the current lag, or an episode, happened since the last tick."""
    meta = verdict.metadata
    return bool(
        meta["lag_peak"] > meta["lag"]
        or meta["hard_backpressure_episodes"]
        or meta["soft_backpressure_episodes"]
    )


def should_record(
    state: GateState, fingerprint: str, now_s: float, spike: bool, max_interval_s: int
) -> bool:
    """Record on change, on a spike, and at least every ``max_interval_s``."""
    if spike or state.observed != fingerprint or state.observed_at is None:
        return True
    return now_s - state.observed_at >= max_interval_s


def _fingerprint(verdict: Verdict, target: MaterializationTarget) -> str:
    return dump_cursor({**verdict.metadata, "target": target.storage_id if target else None})


def due_partition(target: PublishTarget, now: datetime, instance: dg.DagsterInstance) -> str | None:
    """The newest partition whose window has closed, if the gate launches new partitions."""
    if target.partitions_def is None or not target.launch_due_partitions:
        return None
    keys = target.partitions_def.get_partition_keys(
        current_time=now, dynamic_partitions_store=instance
    )
    return keys[-1] if keys else None


def _materialised(instance: dg.DagsterInstance, asset_key: dg.AssetKey) -> set[str]:
    return instance.get_materialized_partitions(asset_key)


def failed_during(
    instance: dg.DagsterInstance, target: PublishTarget, stream: StreamTarget, episode: str | None
) -> list[str]:
    """Partitions whose publish run for this stream failed during the pause episode.

    A run caught by the pause waits on the flag and fails once it has waited longer than
    ``SENTINEL_MAX_PAUSE_S``; its partition was held back as surely as one never launched.
    """
    if episode is None:
        return []
    started = datetime.fromtimestamp(int(episode) / 1000, tz=UTC)
    runs = instance.get_runs(
        filters=dg.RunsFilter(
            job_name=target.job_name,
            statuses=[dg.DagsterRunStatus.FAILURE],
            tags={"sentinel/stream": stream.name},
            updated_after=started,
        ),
        limit=FAILED_RUNS_CAP,
    )
    partitions = (run.tags.get("dagster/partition") for run in runs)
    return sorted({p for p in partitions if p})


def _run_request(
    stream: StreamTarget, target: PublishTarget, partition: str | None, run_key: str, reason: str
) -> dg.RunRequest:
    return dg.RunRequest(
        run_key=run_key,
        job_name=target.job_name,
        partition_key=partition,
        asset_selection=list(target.asset_selection) if target.asset_selection else None,
        tags={"sentinel/stream": stream.name, "sentinel/launched_by": f"{SENSOR_NAME}:{reason}"},
    )


def _set_flag(client: RedisClient, keys: StreamKeys, zone_name: str, episode: str) -> None:
    client.set(keys.paused, f"{FLAG_PREFIX}{zone_name}:{episode}", ex=PAUSE_FLAG_TTL_S)


def _clear_flag(client: RedisClient, keys: StreamKeys) -> None:
    """Clear the flag only if this sensor set it: an operator's manual pause stays."""
    value = client.get(keys.paused)
    if value is not None and value.startswith(FLAG_PREFIX):
        client.delete(keys.paused)


def _zone_alert(
    stream: StreamTarget,
    keys: StreamKeys,
    previous: str | None,
    current: str,
    snapshot: LagSnapshot,
    settings: Settings,
    action: str | None,
    episode: str | None,
    relaunch: list[str],
) -> Alert:
    what = {
        "pause": f"producers paused ({keys.paused} set), no new publish runs",
        "resume": f"producers resumed, {len(relaunch)} held partition(s) relaunched",
    }.get(action or "", "no publish action")
    return Alert(
        severity=ZONE_SEVERITY[current],  # type: ignore[arg-type]
        source=SENSOR_NAME,
        stream=keys.stream,
        condition=f"{action}:{episode}" if action else f"zone:{previous}->{current}",
        summary=f"lag zone {previous or 'unknown'} -> {current} (lag {snapshot.lag}, "
        f"warn {settings.lag_warn}, pause {settings.lag_pause}): {what}",
        details={
            "stream_name": stream.name,
            "previous_zone": previous,
            "zone": current,
            "lag": snapshot.lag,
            "pending": snapshot.reading.pending,
            "backlog": snapshot.reading.backlog,
            "consumers_alive": snapshot.consumers_alive,
            "action": action,
            "episode": episode,
            "relaunched_partitions": relaunch,
        },
    )


def _spike_alert(
    stream: StreamTarget, keys: StreamKeys, verdict: Verdict, settings: Settings
) -> Alert | None:
    """One alert for a hard backpressure episode or a peak at the pause limit since the
    last tick; the condition is fixed per stream so the cool-down silences repeats."""
    meta = verdict.metadata
    hard = int(meta["hard_backpressure_episodes"])
    if not hard and meta["peak_zone"] != "backpressure":
        return None
    return Alert(
        severity="error",
        source=SENSOR_NAME,
        stream=keys.stream,
        condition="hard_backpressure",
        summary=f"lag peaked at {meta['lag_peak']} (pause limit {settings.lag_pause}) since "
        f"the last check, {hard} hard backpressure episode(s); lag now {meta['lag']}",
        details={
            "stream_name": stream.name,
            "lag_peak": meta["lag_peak"],
            "lag": meta["lag"],
            "hard_backpressure_episodes": hard,
            "soft_backpressure_episodes": meta["soft_backpressure_episodes"],
            "lag_pause": settings.lag_pause,
        },
    )


def _adopt_flag(client: RedisClient, keys: StreamKeys, state: GateState) -> None:
    """A flag this sensor set survives a lost cursor: continue its episode, don't orphan it."""
    if state.paused:
        return
    value = client.get(keys.paused)
    if value is not None and value.startswith(FLAG_PREFIX):
        state.paused, state.episode = True, value.rsplit(":", 1)[-1]


def _advance_pause(
    stream: StreamTarget,
    publish: PublishTarget | None,
    state: GateState,
    current: str,
    client: RedisClient,
    keys: StreamKeys,
    instance: dg.DagsterInstance,
) -> tuple[str | None, list[str]]:
    """Start, continue or end the pause episode; return the action and partitions to resume."""
    action: str | None = None
    if current in PAUSE_ZONES and not state.paused:
        state.paused, state.episode, action = True, str(int(time.time() * 1000)), "pause"
    if not state.paused:
        return action, []
    if current != "nominal":  # hysteresis: elevated is not enough to resume
        _set_flag(client, keys, current, state.episode or "0")
        return action, []
    _clear_flag(client, keys)
    failed = failed_during(instance, publish, stream, state.episode) if publish else []
    resume = sorted({*state.held, *failed})
    state.paused, state.held = False, []
    return "resume", resume


def _launches(
    stream: StreamTarget,
    publish: PublishTarget,
    state: GateState,
    resume: list[str],
    blocked: bool,
    instance: dg.DagsterInstance,
    now: datetime,
) -> list[dg.RunRequest]:
    """Run requests for resumed partitions and a newly due one, never twice the same."""
    materialised = _materialised(instance, stream.asset_key)
    runs = [
        _run_request(stream, publish, p, f"resume:{stream.name}:{p}:{state.episode}", "resume")
        for p in resume
        if p not in materialised
    ]
    due = due_partition(publish, now, instance)
    if due is None or due == state.last_due:
        return runs
    state.last_due = due
    if state.paused or blocked:
        if due not in state.held:
            state.held.append(due)
    elif due not in materialised and due not in resume:
        runs.append(_run_request(stream, publish, due, f"publish:{stream.name}:{due}", "due"))
    return runs


def evaluate_stream(
    stream: StreamTarget,
    publish: PublishTarget | None,
    state: GateState,
    client: RedisClient,
    settings: Settings,
    instance: dg.DagsterInstance,
    alerts: AlertSink,
    now: datetime,
) -> TickOutcome:
    """One stream's tick: observe, evaluate the lag check, move the gate, launch, alert."""
    keys = stream.keys_of(settings)
    snapshot = lag_snapshot(client, keys)
    verdict = evaluate_lag(snapshot, settings, take_peaks(client, keys))
    current = str(verdict.metadata["zone"])
    out = TickOutcome()
    target = latest_materialization(instance, stream.asset_key)
    processed = progress(client, keys).processed  # also a sample for `sentinel status` rates
    fingerprint = _fingerprint(verdict, target)
    now_s = now.timestamp()
    spike = spiked(verdict)
    if should_record(state, fingerprint, now_s, spike, settings.observation_max_interval_s):
        state.observed, state.observed_at = fingerprint, now_s
        extra = {} if processed is None else {"entries_processed": processed}
        extra["entries_retained"] = retained_entries(client, keys)  # see streams/retention.py
        out.events.append(
            dg.AssetObservation(asset_key=stream.asset_key, metadata={**verdict.metadata, **extra})
        )
        out.events.append(
            verdict.evaluation(stream.asset_key, LAG_CHECK, blocking=True, target=target)
        )
    spike_alert = _spike_alert(stream, keys, verdict, settings) if spike else None
    if spike_alert is not None:
        alerts.send(spike_alert)

    previous = state.zone
    _adopt_flag(client, keys, state)
    action, resume = _advance_pause(stream, publish, state, current, client, keys, instance)
    if publish is not None:
        out.runs = _launches(stream, publish, state, resume, verdict.blocks, instance, now)
    relaunched = [r.partition_key or "" for r in out.runs if (r.run_key or "").startswith("resume")]

    zone_changed = previous != current and not (previous is None and current == "nominal")
    if zone_changed or action:
        alerts.send(
            _zone_alert(
                stream,
                keys,
                previous,
                current,
                snapshot,
                settings,
                action,
                state.episode,
                relaunched,
            )
        )
    state.zone = current
    held = f", {len(state.held)} partition(s) held" if state.held else ""
    paused = f", paused since episode {state.episode}" if state.paused else ""
    peak = verdict.metadata["lag_peak"]
    peaked = f", peak {peak}" if peak > snapshot.lag else ""
    out.notes.append(f"{stream.name}: {current} (lag {snapshot.lag}{peaked}){paused}{held}")
    return out


def build_lag_sensor(
    streams: Sequence[StreamTarget] = STREAM_TARGETS,
    publish: Mapping[str, PublishTarget] | None = None,
    clock: Clock = _utc_now,
    name: str = SENSOR_NAME,
    interval_s: int = INTERVAL_S,
) -> dg.SensorDefinition:
    """The lag gate for ``streams``; ``publish`` maps a stream name to the job it may launch."""
    publish = dict(publish or {})
    jobs = list({target.job_name: target.job for target in publish.values()}.values())

    @dg.sensor(
        name=name,
        minimum_interval_seconds=interval_s,
        default_status=dg.DefaultSensorStatus.RUNNING,
        jobs=jobs or None,
        description="Records consumer lag and its peak since the last tick per stream (on "
        "change, at least every `SENTINEL_OBSERVATION_MAX_INTERVAL_S`), pauses publishing "
        "under backpressure or with no live worker, resumes held partitions at nominal, "
        "alerts on zone changes and hard backpressure episodes.",
    )
    def _sensor(
        context: dg.SensorEvaluationContext, stream_inspector: StreamInspector, alerts: AlertSink
    ) -> dg.SensorResult:
        cursor = load_cursor(context.cursor)
        states = cursor.get("streams", {})
        settings = stream_inspector.get_settings()
        now = clock()
        events: list[Any] = []
        runs: list[dg.RunRequest] = []
        notes: list[str] = []
        with stream_inspector.client() as client:
            for stream in streams:
                state = GateState.from_json(states.get(stream.name))
                outcome = evaluate_stream(
                    stream,
                    publish.get(stream.name),
                    state,
                    client,
                    settings,
                    context.instance,
                    alerts,
                    now,
                )
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
