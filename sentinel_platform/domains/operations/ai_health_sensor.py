"""The AI-health sensor: the AI's state per stream in the Dagster UI and in the alerts.

Each tick reads the fleet's analyzer holds once and, per stream, the AI figures
(:func:`~sentinel_platform.domains.operations.ai_health_read.read_figures`), records the
``ai_verdicts`` check's evaluation on the stream's asset (so the UI shows the share of
model verdicts, the holds and the provisional backlog while an outage lasts, not only
when the checks job runs), and alerts through the one ``AlertSink``:

* per hold, once per episode (:mod:`~sentinel_platform.domains.operations.analyzer_holds`:
  past a minute, an exhaustion at once);
* per stream, a high share of fallbacks and provisional verdicts piling up or ageing
  (:func:`~sentinel_platform.domains.operations.ai_health.health_alerts`), sent every tick
  the condition holds and de-duplicated by the alert cool-down like the other sensors'.

Every text says what becomes of the messages under ``SENTINEL_ANALYZER_WHEN_DOWN``.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

import dagster as dg

from sentinel_platform.domains.operations.ai_health import (
    CHECK_NAME,
    fate_policy,
    health_alerts,
    judge,
)
from sentinel_platform.domains.operations.ai_health_read import read_figures
from sentinel_platform.domains.operations.analyzer_holds import due, held_since, hold_alert
from sentinel_platform.domains.operations.check_verdict import latest_materialization
from sentinel_platform.domains.operations.cursor import dump_cursor
from sentinel_platform.domains.operations.sensor_shell import SensorTick, operations_sensor
from sentinel_platform.domains.operations.targets import StreamTarget, stream_targets
from sentinel_platform.streams.operators import analyzer_holds as holds

SENSOR_NAME = "ai_health_sensor"
INTERVAL_S = 30


def build_ai_health_sensor(
    streams: Sequence[StreamTarget] | None = None, name: str = SENSOR_NAME
) -> dg.SensorDefinition:
    """The AI-health sensor for ``streams`` (default: every declared stream)."""
    streams = stream_targets() if streams is None else streams

    @operations_sensor(
        name,
        INTERVAL_S,
        "The AI's health per stream: records the `ai_verdicts` check (share of model "
        "verdicts, holds, provisional verdicts) and alerts on a high share of fallbacks, "
        "an analyzer held over a minute or exhausted, and provisional verdicts piling up.",
    )
    def _sensor(tick: SensorTick) -> dg.SensorResult:
        current = tick.settings
        when_down = fate_policy(str(current.analyzer_when_down), current.analyzer_rescreen)
        events: list[dg.AssetCheckEvaluation] = []
        notes: list[str] = []
        with tick.client() as client:
            found = holds.read_holds(client, holds.configured_ids(current))
            figures = [
                read_figures(client, stream.name, stream.keys_of(current), current, found)
                for stream in streams
            ]
        now = time.time()
        since = held_since(found, dict(tick.cursor.get("since", {})), now)
        alerted = set(tick.cursor.get("alerted", [])) & set(since)
        for hold, held_s in due(found, since, alerted, now):
            tick.alerts.send(hold_alert(hold, held_s, since[hold.ident], name, when_down))
            alerted.add(hold.ident)
        for stream, figure in zip(streams, figures, strict=True):
            verdict = judge(figure)
            target = latest_materialization(tick.context.instance, stream.asset_key)
            events.append(verdict.evaluation(stream.asset_key, CHECK_NAME, target=target))
            for alert in health_alerts(figure, name):
                tick.alerts.send(alert)
            notes.append(f"{stream.name}: {verdict.description}")
        notes += [holds.hold_text(hold) for hold in found] or ["no analyzer hold"]
        return dg.SensorResult(
            skip_reason=dg.SkipReason("; ".join(notes)),
            cursor=dump_cursor({"since": since, "alerted": sorted(alerted)}),
            asset_events=events,
        )

    return _sensor
