"""What ``sentinel status`` reads from Redis as text, as the typed records it prints.

Workers and publishers store their records as text (a worker's registration is JSON in a
hash, a publish record's numbers are hash strings, an alert's details are JSON in a stream
field). ``sentinel status --json`` prints them typed (see :mod:`sentinel_platform.cli.output`):
numbers as numbers, JSON as objects, times as aware datetimes (ISO-8601 in the output).
Anything unreadable becomes None rather than failing the whole status.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any


def registration(raw: str | None) -> dict[str, Any] | None:
    """A worker's registry entry (JSON text it wrote): pid, host and start time, typed."""
    try:
        info = json.loads(raw) if raw else None
    except ValueError:
        return None
    if not isinstance(info, dict):
        return None
    pid, host = info.get("pid"), info.get("host")
    return {
        "pid": pid if isinstance(pid, int) else None,
        "host": host if isinstance(host, str) else None,
        "started": as_time(info.get("started")),
    }


def as_time(value: object) -> datetime | None:
    """An ISO-8601 time (UTC when naive) or epoch seconds, as an aware datetime."""
    if isinstance(value, (int, float)) or (isinstance(value, str) and _is_number(value)):
        return datetime.fromtimestamp(float(value), tz=timezone.utc)
    if not isinstance(value, str) or not value:
        return None
    try:
        moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def publish_record(raw: dict[str, str] | None) -> dict[str, Any] | None:
    """The stream's last-publish record (stored as text) with its numbers and time typed."""
    if not raw:
        return None
    rows = raw.get("rows", "")
    return {
        "run_id": raw.get("run_id") or None,
        "partition": raw.get("partition") or None,
        "rows": int(rows) if rows.isdigit() else None,
        "at": as_time(raw.get("at")),
        "outcome": raw.get("outcome") or None,
        "error": raw.get("error") or None,
        "lane": raw.get("lane") or None,
    }


def alert_record(alert_id: str, fields: dict[str, str]) -> dict[str, Any]:
    """One entry of the alert stream (``Alert.to_fields``), its details as an object."""
    millis = int(alert_id.split("-", 1)[0])
    try:
        details = json.loads(fields.get("details") or "{}")
    except ValueError:
        details = {"text": fields.get("details")}
    return {
        "id": alert_id,
        "at": datetime.fromtimestamp(millis / 1000, tz=timezone.utc),
        "severity": fields.get("severity", "?"),
        "source": fields.get("source", "?"),
        "stream": fields.get("stream") or None,
        "summary": fields.get("summary", ""),
        "condition": fields.get("condition", ""),
        "details": details if isinstance(details, dict) else {"value": details},
    }
