"""The analyzer-hold sensor: a warning when the fleet has been held off an analyzer for
over a minute.

A short hold is routine (a ``Retry-After: 2`` costs two seconds); one that lasts means no
message is assessed and the lag grows, often for a reason only an operator can end (a
spent quota). Each tick reads every hold (``streams.operators.analyzer_holds``: the
analyzers the workers registered and the one the settings name) and remembers in its
cursor since when each one has been seen. Once a hold has lasted ``ALERT_AFTER_S`` it
raises one warning naming the analyzer, the cause, the reason and the command that ends
it, to the log, the stream ``sentinel:alerts`` and the webhook (``AlertSink``). A hold
that ends and comes back is a new episode, alerted again. The decisions are the pure
:func:`held_since` and :func:`due`, table-tested; the sensor is their shell. The same
condition reaches Prometheus as ``SentinelAnalyzerHeld`` (from the exporter).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence

import dagster as dg

from sentinel_platform.alerting.model import Alert
from sentinel_platform.domains.operations.cursor import dump_cursor
from sentinel_platform.domains.operations.sensor_shell import SensorTick, operations_sensor
from sentinel_platform.streams.operators import analyzer_holds as holds

SENSOR_NAME = "analyzer_hold_sensor"
INTERVAL_S = 30
#: A hold seen for this long raises the warning (the Prometheus rule's ``for: 1m``).
ALERT_AFTER_S = 60.0


def held_since(found: Sequence[holds.Hold], seen: dict[str, float], now: float) -> dict[str, float]:
    """Since when each hold in ``found`` has been held: what the cursor remembers, else
    when its record says it was set (never later than ``now``). A hold no longer found
    drops out, so its return is a new episode."""
    since = {}
    for hold in found:
        first = seen.get(hold.ident)
        if first is None:
            first = now if hold.set_at is None else min(now, hold.set_at)
        since[hold.ident] = first
    return since


def due(
    found: Sequence[holds.Hold], since: dict[str, float], alerted: set[str], now: float
) -> list[tuple[holds.Hold, float]]:
    """The holds to warn about now, with how long each has lasted: held at least
    ``ALERT_AFTER_S`` and not yet alerted in this episode. Never the fleet's pacing to an
    announced budget (``ANNOUNCED_LIMIT``): it ends by itself within one window, and
    where the budget stays nearly spent one such hold follows another with calls made
    between them, which ticks 30 s apart cannot tell from one long hold."""
    return [
        (hold, now - since[hold.ident])
        for hold in found
        if hold.cause != holds.ANNOUNCED_LIMIT
        and hold.ident not in alerted
        and now - since[hold.ident] >= ALERT_AFTER_S
    ]


def hold_alert(hold: holds.Hold, held_s: float, since: float) -> Alert:
    left = "until released" if hold.seconds_left is None else f"{hold.seconds_left:.0f} s left"
    on_key = f" on the key {hold.key}" if hold.key_digest else ""
    return Alert(
        severity="warning",
        source=SENSOR_NAME,
        condition=f"analyzer_hold:{hold.ident}:{math.floor(since)}",
        summary=f"No worker{on_key} has called the analyzer {hold.analyzer_id} "
        f"({hold.analyzer or 'URL not recorded'}) for {held_s:.0f} s: the fleet is held "
        f"({hold.cause}, {left}: {hold.reason}). Its messages wait; `sentinel analyzer "
        f"release --analyzer {hold.analyzer_id}` ends the hold once the analyzer is usable",
        details={
            "analyzer_id": hold.analyzer_id,
            "analyzer": hold.analyzer,
            "key": hold.key,
            "cause": hold.cause,
            "reason": hold.reason,
            "seconds_left": hold.seconds_left,
            "held_s": round(held_s, 1),
        },
    )


@operations_sensor(
    SENSOR_NAME,
    INTERVAL_S,
    "Warns when the fleet has been held off an analyzer for over a minute.",
)
def analyzer_hold_sensor(tick: SensorTick) -> dg.SensorResult:
    with tick.client() as client:
        found = holds.read_holds(client, holds.configured_ids(tick.settings))
    now = time.time()
    since = held_since(found, dict(tick.cursor.get("since", {})), now)
    alerted = set(tick.cursor.get("alerted", [])) & set(since)
    for hold, held_s in due(found, since, alerted, now):
        tick.alerts.send(hold_alert(hold, held_s, since[hold.ident]))
        alerted.add(hold.ident)
    reason = "; ".join(holds.hold_text(hold) for hold in found) or "no analyzer hold"
    return dg.SensorResult(
        skip_reason=dg.SkipReason(reason),
        cursor=dump_cursor({"since": since, "alerted": sorted(alerted)}),
    )
