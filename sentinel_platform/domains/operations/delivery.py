"""The delivery-count anomaly sensor: near-limit, idle, orphaned and stalled messages.

Each tick scans at most ``PENDING_SCAN_CAP`` pending entries per stream (oldest first)
and keeps, in its cursor, a short window of pending counts and of oldest pending ids per
consumer to judge stalls over several ticks (``windows`` and ``oldest``: a cursor of an
older release, without ``oldest``, judges its first stall one window later). One alert
per stream and kind (per consumer for orphaned and stalled), de-duplicated across ticks by
the alert cool-down. Each tick also prunes the stream's hand-back holder once it holds
nothing (:func:`~sentinel_platform.domains.operations.handback.prune_handback`): no worker
does, since none registers it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import partial
from typing import Any

import dagster as dg

from sentinel_platform.alerting.model import Alert
from sentinel_platform.domains.operations.anomalies import (
    STALL_WINDOW_TICKS,
    Anomalies,
    find_anomalies,
    slide_windows,
    stalled,
    summarise,
)
from sentinel_platform.domains.operations.check_verdict import latest_materialization
from sentinel_platform.domains.operations.cursor import dump_cursor
from sentinel_platform.domains.operations.handback import PRUNE_IDLE_MS, prune_handback
from sentinel_platform.domains.operations.lag_analyzer import analyzer_explains_wait
from sentinel_platform.domains.operations.sensor_shell import SensorTick, operations_sensor
from sentinel_platform.domains.operations.stream_health import DELIVERY_CHECK, evaluate_delivery
from sentinel_platform.domains.operations.targets import StreamTarget, stream_targets
from sentinel_platform.streams.operators.group_view import oldest_pending

SENSOR_NAME = "delivery_anomaly_sensor"
INTERVAL_S = 30


def anomaly_alerts(
    anomalies: Anomalies,
    stalls: dict[str, list[int]],
    idle_limit_ms: int,
    oldest: Mapping[str, list[str]],
) -> list[Alert]:
    """The alerts of one stream's anomalies; ``oldest`` is each consumer's window of
    oldest pending ids (the stall's evidence, named in its alert)."""
    stream = anomalies.stream
    out: list[Alert] = []
    if anomalies.near_limit:
        facts = summarise(anomalies.near_limit)
        out.append(
            Alert(
                severity="error" if anomalies.over_limit else "warning",
                source=SENSOR_NAME,
                stream=stream,
                condition="near_limit",
                summary=f"{facts['count']} pending message(s) one delivery from the limit "
                f"{anomalies.limit} (max {facts['max_deliveries']} deliveries), "
                f"ids {', '.join(facts['ids'][:3])}",
                details={**facts, "kind": "near_limit", "delivery_limit": anomalies.limit},
            )
        )
    if anomalies.idle:
        facts = summarise(anomalies.idle)
        out.append(
            Alert(
                severity="warning",
                source=SENSOR_NAME,
                stream=stream,
                condition="idle",
                summary=f"{facts['count']} pending message(s) idle over {idle_limit_ms} ms "
                f"(max {facts['max_idle_ms']} ms), ids {', '.join(facts['ids'][:3])}",
                details={**facts, "kind": "idle", "reclaim_idle_ms": idle_limit_ms},
            )
        )
    for consumer, count in sorted(anomalies.orphaned.items()):
        ids = anomalies.orphaned_ids.get(consumer, [])
        out.append(
            Alert(
                severity="warning" if anomalies.live else "error",
                source=SENSOR_NAME,
                stream=stream,
                condition=f"orphaned:{consumer}",
                summary=f"consumer {consumer} holds {count} pending message(s) without a live "
                f"lease ({anomalies.live} live consumer(s) to recover them)",
                details={
                    "kind": "orphaned",
                    "consumer": consumer,
                    "count": count,
                    "ids": ids,
                    "live_consumers": anomalies.live,
                },
            )
        )
    for consumer, counts in sorted(stalls.items()):
        ids = oldest.get(consumer, [])
        oldest_id = ids[-1] if ids else None
        out.append(
            Alert(
                severity="error",
                source=SENSOR_NAME,
                stream=stream,
                condition=f"stalled:{consumer}",
                summary=f"consumer {consumer} stalled: pending only grew over {len(counts)} "
                f"ticks ({counts[0]} -> {counts[-1]}) and its oldest, {oldest_id}, never settled",
                details={
                    "kind": "stalled",
                    "consumer": consumer,
                    "window": counts,
                    "oldest_id": oldest_id,
                },
            )
        )
    return out


def build_delivery_sensor(
    streams: Sequence[StreamTarget] | None = None,
    window_ticks: int = STALL_WINDOW_TICKS,
    name: str = SENSOR_NAME,
    interval_s: int = INTERVAL_S,
    handback_idle_ms: int = PRUNE_IDLE_MS,
) -> dg.SensorDefinition:
    """The delivery sensor for ``streams`` (default: every declared stream); an empty
    hand-back holder left alone ``handback_idle_ms`` is pruned."""
    streams = stream_targets() if streams is None else streams

    @operations_sensor(
        name,
        interval_s,
        "Alerts on pending messages near the delivery limit, idle past reclaim, "
        "held by dead consumers, and on consumers whose pending count only grows.",
    )
    def _sensor(tick: SensorTick) -> dg.SensorResult:
        windows: dict[str, Any] = tick.cursor.get("windows", {})
        oldest: dict[str, Any] = tick.cursor.get("oldest", {})
        current = tick.settings
        notes: list[str] = []
        events: list[dg.AssetCheckEvaluation] = []
        with tick.client() as client:
            for stream in streams:
                keys = stream.keys_of(current)
                pruned = prune_handback(client, keys, handback_idle_ms) == "pruned"
                waits = partial(analyzer_explains_wait, client, stream.name, keys, current)
                anomalies = find_anomalies(client, keys, current, analyzer_waits=waits)
                held = [name for name, count in anomalies.pending_per_consumer.items() if count]
                windows[stream.name] = slide_windows(
                    windows.get(stream.name, {}), anomalies.pending_per_consumer, window_ticks
                )
                oldest[stream.name] = slide_windows(
                    oldest.get(stream.name, {}), oldest_pending(client, keys, held), window_ticks
                )
                stalls = stalled(windows[stream.name], oldest[stream.name], window_ticks)
                verdict = evaluate_delivery(anomalies)
                target = latest_materialization(tick.context.instance, stream.asset_key)
                events.append(verdict.evaluation(stream.asset_key, DELIVERY_CHECK, target=target))
                raised = anomaly_alerts(
                    anomalies, stalls, current.reclaim_idle_ms, oldest[stream.name]
                )
                sent = sum(tick.alerts.send(alert).sent for alert in raised)
                notes.append(
                    f"{stream.name}: {anomalies.pending_total} pending, {len(raised)} anomaly "
                    f"kind(s), {sent} alert(s) sent"
                    + (", the empty hand-back holder pruned" if pruned else "")
                )
        return dg.SensorResult(
            skip_reason=dg.SkipReason("; ".join(notes)),
            cursor=dump_cursor({"windows": windows, "oldest": oldest}),
            asset_events=events,
        )

    return _sensor
