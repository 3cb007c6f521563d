"""``sentinel status`` in words: the status document (:func:`~.status.collect`) as the
lines an operator reads, zones coloured only on a terminal.

Kept apart from the reads so each stays small: the document is the one truth (``--json``
prints it as it is), and nothing here reads Redis.
"""

from __future__ import annotations

from typing import Any, TextIO

from sentinel_platform.cli import (
    status_batch,
    status_provisional,
    status_quality,
    status_shards,
    status_verdicts,
)
from sentinel_platform.cli import status_records as records
from sentinel_platform.cli.common import human_ms, paint
from sentinel_platform.streams.backlog.retention import describe as describe_retention
from sentinel_platform.streams.operators import analyzer_holds as holds

#: The colour of each eviction verdict, borrowed from the zone of the same gravity.
EVICTION_COLOUR_ZONE = {
    "ok": "nominal",
    "unknown": "elevated",
    "warn": "elevated",
    "refuse": "backpressure",
}


def _dlq_line(doc: dict[str, Any]) -> str:
    """``dlq: sentinel:dlq 85 (85% of SENTINEL_DLQ_MAXLEN 100; run ...)``."""
    parts = []
    for dlq, fill in doc.get("dlq_fill", {}).items():
        advice = "" if fill["level"] == "ok" else "; run `sentinel dlq export` before it trims"
        parts.append(
            f"{dlq} {fill['entries']} ({fill['percent']}% of SENTINEL_DLQ_MAXLEN {fill['cap']}"
            f"{advice})"
        )
    return "dlq: " + ", ".join(parts)


def _alert_line(alert: dict[str, Any]) -> str:
    """One line per alert (fields written by ``sentinel_platform.alerting``)."""
    when = alert["at"][:19].replace("T", " ")
    severity = str(alert.get("severity", "?")).upper()
    where = f" [{alert['stream']}]" if alert.get("stream") else ""
    text = alert.get("summary") or alert.get("condition") or ""
    return f"  {when}  {severity:<8} {alert.get('source', '?')}{where}: {text}"


def _progress_line(s: dict[str, Any]) -> str:
    processed = "-" if s["processed"] is None else s["processed"]
    rate = "n/a (run again in a minute)" if s["rate_per_s"] is None else f"{s['rate_per_s']:.1f}/s"
    return f"  processed {processed}   rate (last minute) {rate}"


def _publish_line(record: dict[str, Any] | None) -> str:
    """``last publish 2026-11-22 (500 rows) at 12:01:05 UTC: success``; ``... (500 rows)
    to the batch lane at ...`` for a publish to the stream's batch lane."""
    if not record:
        return "  last publish: none recorded"
    at = records.as_time(record.get("at"))
    when = "?" if at is None else at.strftime("%Y-%m-%d %H:%M:%S UTC")
    partition = record.get("partition") or "unpartitioned"
    rows = "" if record.get("rows") is None else f" ({record['rows']} rows)"
    outcome = record.get("outcome", "?")
    error = f" ({record['error']})" if record.get("error") else ""
    run = (record.get("run_id") or "?")[:8]
    lane = " to the batch lane" if record.get("lane") == "batch" else ""
    return f"  last publish: {partition}{rows}{lane} at {when}, run {run}: {outcome}{error}"


def _registration(info: dict[str, Any] | None) -> str:
    """``pid 123 on host`` from a worker's registration, or nothing."""
    if not info or info.get("pid") is None:
        return ""
    return f"pid {info['pid']} on {info.get('host') or '?'}"


def _eviction_line(state: dict[str, Any], out: TextIO) -> str:
    """``redis maxmemory-policy noeviction (ok)``, with the reason unless it is ok."""
    policy = state["policy"] or "not reported"
    verdict = paint(state["verdict"], EVICTION_COLOUR_ZONE[state["verdict"]], out)
    reason = "" if state["verdict"] == "ok" else f": {state['message']}"
    return f"redis maxmemory-policy {policy} ({verdict}){reason}"


def render(doc: dict[str, Any], out: TextIO, shards: bool = False) -> None:
    """Human-readable status; zones coloured only on a terminal; ``shards``: each shard of
    a sharded stream on a line of its own."""
    lines = [
        f"redis: {doc['redis']}   limits: {doc['limits']['text']} "
        f"(in flight at most {doc['limits']['in_flight_per_worker']} per worker)",
        _eviction_line(doc["redis_eviction"], out),
    ]
    for s in doc["streams"]:
        zone_text = paint(s["zone"].replace("_", " "), s["zone"], out)
        paused = "  PRODUCER PAUSED" if s["producer_paused"] else ""
        dlq = "?" if s["dlq_depth"] is None else s["dlq_depth"]
        lines.append("")
        count = f"  {len(s['shards'])} shards" if s.get("shards") else ""
        lines.append(f"{s['stream']}  (group {s['group']})  {zone_text}{paused}{count}")
        work = s.get("work_s")
        rate = s.get("drain_rate_per_s")
        drains = (
            "drain rate not measured"
            if rate is None
            else f"{'-' if work is None else work} s of work at {rate:g} rows/s"
        )
        lines.append(
            f"  lag {s['lag']} = backlog {s['backlog']} + pending {s['pending']} ({drains})   "
            f"published lag {'-' if s['published_lag'] is None else s['published_lag']}   "
            f"in flight {s.get('in_flight_allowance', 0)}   "
            f"dead letters {dlq}"
        )
        lines.append(_progress_line(s))
        lines.append(_publish_line(s["last_publish"]))
        lines.append(status_verdicts.verdict_line(s.get("verdicts")))
        if provisional := status_provisional.line(s.get("provisional")):
            lines.append(provisional)
        if quality := status_quality.line(s.get("quality")):
            lines.append(quality)
        if batch := status_batch.line(s.get("batch")):
            lines.append(batch)
        if s.get("drain_advice"):
            lines.append(paint(f"  advice: {s['drain_advice']}", "elevated", out))
        if s.get("retained"):
            lines.append(describe_retention(s["retained"]))
        if shards:
            lines.extend(status_shards.shard_lines(s))
        if not s["consumers"]:
            lines.append("  consumers: none")
        for c in s["consumers"]:
            lease = paint(c["lease"], "nominal" if c["lease"] == "alive" else "backpressure", out)
            lines.append(
                f"  - {c['name']:<32} {lease:<5}  pending {c['pending']:<6} "
                f"in-flight limit {'-' if c.get('holds') is None else c['holds']:<5} "
                f"idle {human_ms(c['idle_ms']):<7} {_registration(c['registered'])}"
            )
    lines.append("")
    for hold in doc["analyzer_holds"]:
        shown = paint(f"analyzer hold: {holds.hold_text(holds.Hold(**hold))}", "elevated", out)
        whom = "no worker calls with this key" if hold["key_digest"] else "no worker calls it"
        lines.append(f"{shown} ({whom}; `sentinel analyzer release` ends it)")
    lines.extend(paint(f"warning: {text}", "elevated", out) for text in doc["warnings"])
    lines.append(_dlq_line(doc))
    lines.append(f"alerts (last {len(doc['alerts'])}):" if doc["alerts"] else "alerts: none")
    lines.extend(_alert_line(a) for a in doc["alerts"])
    overall = paint(doc["zone"].replace("_", " "), doc["zone"], out)
    lines.append(f"overall: {overall} (exit {doc['exit_code']})")
    out.write("\n".join(lines) + "\n")
