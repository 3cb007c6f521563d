"""The dead-letter sensor: one summarised alert per tick for new dead letters.

The cursor holds the last DLQ id seen per DLQ stream, so a restarted daemon (or code
server) never re-alerts old entries. On its very first tick the sensor does not page
through history: it records the current depth as a baseline, alerts once with what is
already there, and from then on reports only what is new. Each tick reads at most
``DLQ_READ_CAP`` entries; a larger burst is reported over the following ticks.

The depth observation is recorded when depth or new entries changed, and otherwise at
least every ``SENTINEL_OBSERVATION_MAX_INTERVAL_S``, so the asset's Events list shows
what happened rather than one identical line per tick.

Past ``SENTINEL_DLQ_MAXLEN`` the workers' capped XADD trims the oldest dead letters, the
only copies of their messages. The sensor warns when the fullest DLQ stream reaches 80%
of the cap and raises an error at 95% (``streams/operators/dlq_capacity.py``), saying what to do:
``sentinel dlq export`` (``--delete-exported`` makes room) or a larger cap. It alerts
once per upward crossing: the level is kept in the cursor, and falling back below 80%
re-arms it (the alert cool-down still silences a DLQ flapping around a threshold).
"""

from __future__ import annotations

import time
from collections import Counter
from typing import Any

import dagster as dg

from sentinel_platform.alerting.model import Alert
from sentinel_platform.domains.operations.check_verdict import latest_materialization
from sentinel_platform.domains.operations.cursor import dump_cursor
from sentinel_platform.domains.operations.sensor_shell import SensorTick, operations_sensor
from sentinel_platform.domains.operations.stream_health import DLQ_CHECK, dead_letter_verdict
from sentinel_platform.domains.operations.targets import DEAD_LETTER_QUEUE_ASSET, stream_targets
from sentinel_platform.streams.operators.dlq_capacity import crossed, fill_level, fullest, percent
from sentinel_platform.streams.operators.group_view import (
    DLQ_READ_CAP,
    DeadLetterEntry,
    dlq_depth,
    fresh,
    last_dead_letter_id,
    read_dead_letters,
)
from sentinel_platform.streams.sharding.shards import dlq_streams_of

SENSOR_NAME = "dead_letter_queue_sensor"
INTERVAL_S = 30
SAMPLE = 5
#: Dead-letter reasons that need an operator (the others are bad input): an error alert.
OPERATOR_REASONS = ("max_deliveries_exceeded", "expired_marker")


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
    severity = "error" if set(OPERATOR_REASONS) & set(summary["by_reason"]) else "warning"
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


def fill_alert(lengths: dict[str, int], cap: int, previous: str | None) -> tuple[str, Alert | None]:
    """The DLQ's fill level now, and the alert to send when it crossed upward."""
    worst = fullest(lengths)
    entries = worst[1] if worst else 0
    level = fill_level(entries, cap)
    if worst is None or level == "ok" or not crossed(previous, level):
        return level, None
    dlq = worst[0]
    alert = Alert(
        severity=level,
        source=SENSOR_NAME,
        condition="dlq_fill",
        summary=f"DLQ {dlq} at {percent(entries, cap)}% of SENTINEL_DLQ_MAXLEN ({entries} of "
        f"{cap}): past the cap its oldest dead letters are trimmed and lost. Run `sentinel dlq "
        "export --output FILE --delete-exported` to save them and make room, or raise "
        "SENTINEL_DLQ_MAXLEN (then restart the workers)",
        details={
            "dlq_fill": {name: {"entries": n, "cap": cap} for name, n in lengths.items()},
            "level": level,
        },
    )
    return level, alert


@operations_sensor(
    SENSOR_NAME,
    INTERVAL_S,
    "Alerts once per tick with a summary of new dead letters; observes DLQ depth.",
)
def dead_letter_queue_sensor(tick: SensorTick) -> dg.SensorResult:
    cursor, current = tick.cursor, tick.settings
    last_ids: dict[str, str] = cursor.get("last_ids", {})
    first_tick = not cursor
    new: list[DeadLetterEntry] = []
    lengths: dict[str, int] = {}
    more = False
    with tick.client() as client:
        for dlq in dlq_streams_of(client, current):
            lengths[dlq] = dlq_depth(client, dlq)
            entries = read_dead_letters(client, dlq, last_ids.get(dlq, "0-0"), DLQ_READ_CAP)
            if first_tick and len(entries) == DLQ_READ_CAP:
                # Baseline: report what is there once, then start from the newest id.
                last_ids[dlq] = last_dead_letter_id(client, dlq) or entries[-1].entry_id
            elif entries:
                last_ids[dlq] = entries[-1].entry_id
            more = more or len(entries) == DLQ_READ_CAP
            new.extend(fresh(entries))  # an entry `sentinel dlq import` restored is not new
    depth = sum(lengths.values())
    level, capacity = fill_alert(lengths, current.dlq_maxlen, cursor.get("fill_level"))
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
        dead_letter_verdict(tick.inspector, current, target).evaluation(
            target.asset_key,
            DLQ_CHECK,
            target=latest_materialization(tick.context.instance, target.asset_key),
        )
        for target in stream_targets()
    ]
    seen = (
        {"observed": fingerprint, "observed_at": now_s}
        if observe
        else {
            "observed": cursor.get("observed"),
            "observed_at": cursor.get("observed_at"),
        }
    )
    new_cursor = dump_cursor({"last_ids": last_ids, "fill_level": level, **seen})
    if capacity is not None:
        tick.alerts.send(capacity)
    if new:
        tick.alerts.send(dead_letter_alert(new, depth, more))
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
