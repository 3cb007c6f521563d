"""Explicit JSON cursors: sensors keep their memory in Dagster, never in process globals."""

from __future__ import annotations

import json
import logging
from typing import Any

log = logging.getLogger(__name__)


def load_cursor(raw: str | None) -> dict[str, Any]:
    """The cursor as a dict; an unreadable cursor starts fresh rather than failing every tick."""
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        log.warning("sensor cursor is not JSON, starting fresh", extra={"cursor": raw[:200]})
        return {}
    return value if isinstance(value, dict) else {}


def dump_cursor(value: dict[str, Any]) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))
