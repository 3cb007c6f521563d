"""The dead-letter sensor: one summarised alert per tick for new dead letters.

The cursor holds the last DLQ id seen per DLQ stream, so a restarted daemon (or code
server) never re-alerts old entries. On its very first tick the sensor does not page
through history: it records the current depth as a baseline, alerts once with what is
already there, and from then on reports only what is new. Each tick reads at most
``DLQ_READ_CAP`` entries; a larger burst is reported over the following ticks.

The depth observation is recorded when depth or new entries changed, and otherwise at
least every ``SENTINEL_OBSERVATION_MAX_INTERVAL_S``, so the asset's Events list shows
what happened rather than one identical line per tick.
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import dagster as dg

from sentinel_platform.alerting.model import Alert
from sentinel_platform.domains.operations.cursor import dump_cursor, load_cursor
from sentinel_platform.domains.operations.stream_health import (
    DLQ_CHECK,
    dead_letter_verdict,
    latest_materialization,
)
from sentinel_platform.domains.operations.targets import DEAD_LETTER_QUEUE_ASSET, STREAM_TARGETS
from sentinel_platform.resources.alerts import AlertSink
from sentinel_platform.resources.settings import SettingsResource
from sentinel_platform.resources.stream_inspector import StreamInspector
from sentinel_platform.streams.inspect import (
    DLQ_READ_CAP,
    DeadLetterEntry,
    dlq_depth,
    last_dead_letter_id,
    read_dead_letters,
)
from sentinel_platform.streams.keys import dlq_streams

SENSOR_NAME = "dead_letter_queue_sensor"
INTERVAL_S = 30
SAMPLE = 5


def summarise_dead_letters(entries: list[DeadLetterEntry]) -> dict[str, Any]:
    return {
        "new": len(entries),
        "by_stream": dict(Counter(e.stream for e in entries)),
        "by_reason": dict(Counter(e.reason for e in entries)),
        "first_ids": [e.entry_id for e in entries[:SAMPLE]],
        "message_ids": [e.fields.get("message_id", "?") for e in entries[:SAMPLE]],
        "sample_errors": list(dict.fromkeys(e.error[:200] for e in entries if e.error))[:SAMPLE],
    }


def dead_letter_alert(entries: list[DeadLetterEntry], depth: int, more: bool) -> Alert:
    summary = summarise_dead_letters(entries)
    by_stream = ", ".join(f"{s}: {n}" for s, n in sorted(summary["by_stream"].items()))
    by_reason = ", ".join(f"{r}: {n}" for r, n in sorted(summary["by_reason"].items()))
    streams = sorted(summary["by_stream"])
    severity = "error" if "max_deliveries_exceeded" in summary["by_reason"] else "warning"
    return Alert(
        severity=severity,
        source=SENSOR_NAME,
        stream=streams[0] if len(streams) == 1 else None,
        # Every batch is a new condition: new dead letters are never "the same again".
        condition=f"new:{entries[0].entry_id}",
        summary=f"{len(entries)}{'+' if more else ''} new dead letter(s) ({by_stream}; "
        f"{by_reason}); DLQ depth {depth}",
        details={**summary, "dlq_depth": depth, "more_pending": more},
    )


@dg.sensor(
    name=SENSOR_NAME,
    minimum_interval_seconds=INTERVAL_S,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Alerts once per tick with a summary of new dead letters; observes DLQ depth.",
)
def dead_letter_queue_sensor(
    context: dg.SensorEvaluationContext,
    settings: SettingsResource,
    stream_inspector: StreamInspector,
    alerts: AlertSink,
) -> dg.SensorResult:
    cursor = load_cursor(context.cursor)
    last_ids: dict[str, str] = cursor.get("last_ids", {})
    first_tick = not cursor
    current = settings.load()
    new: list[DeadLetterEntry] = []
    depth = 0
    more = False
    with stream_inspector.client(current) as client:
        for dlq in dlq_streams(current):
            depth += dlq_depth(client, dlq)
            entries = read_dead_letters(client, dlq, last_ids.get(dlq, "0-0"), DLQ_READ_CAP)
            if first_tick and len(entries) == DLQ_READ_CAP:
                # Baseline: report what is there once, then start from the newest id.
                last_ids[dlq] = last_dead_letter_id(client, dlq) or entries[-1].entry_id
            elif entries:
                last_ids[dlq] = entries[-1].entry_id
            more = more or len(entries) == DLQ_READ_CAP
            new.extend(entries)
    fingerprint = dump_cursor({"depth": depth, "new": len(new)})
    now_s = time.time()
    observe = (
        fingerprint != cursor.get("observed")
        or now_s - float(cursor.get("observed_at", 0)) >= current.observation_max_interval_s
    )
    observations = (
        [
            dg.AssetObservation(
                asset_key=DEAD_LETTER_QUEUE_ASSET,
                metadata={"depth": depth, "new": len(new), **_counts(new)},
            )
        ]
        if observe
        else []
    )
    checks = [
        dead_letter_verdict(stream_inspector, current, target).evaluation(
            target.asset_key,
            DLQ_CHECK,
            target=latest_materialization(context.instance, target.asset_key),
        )
        for target in STREAM_TARGETS
    ]
    seen = (
        {"observed": fingerprint, "observed_at": now_s}
        if observe
        else {
            "observed": cursor.get("observed"),
            "observed_at": cursor.get("observed_at"),
        }
    )
    new_cursor = dump_cursor({"last_ids": last_ids, **seen})
    if new:
        alerts.send(dead_letter_alert(new, depth, more))
        reason = f"alerted on {len(new)} new dead letter(s); DLQ depth {depth}"
    else:
        reason = f"no new dead letters; DLQ depth {depth}"
    return dg.SensorResult(
        skip_reason=dg.SkipReason(reason),
        cursor=new_cursor,
        asset_events=[*observations, *checks],
    )


def _counts(entries: list[DeadLetterEntry]) -> dict[str, Any]:
    summary = summarise_dead_letters(entries)
    return {
        "new_by_stream": dg.MetadataValue.json(summary["by_stream"]),
        "new_by_reason": dg.MetadataValue.json(summary["by_reason"]),
    }
