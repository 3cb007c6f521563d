"""Structured logs: one JSON object per line, with secrets scrubbed.

Workers log events (recovered, dead-lettered, retried, lag written, stopping) with the
stream, group, consumer and message id as fields, so a log query can follow one message
through the pool. Anything that looks like a URL with a password is redacted before it
is written, whoever produced it.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import time
from typing import Any

_URL_PASSWORD = re.compile(r"(?P<scheme>[a-z+]+://)(?P<user>[^:/@\s]*):(?P<pw>[^@\s]+)@")
_STD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None)).keys()) | {
    "message",
    "asctime",
    "taskName",
}
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def scrub(text: str) -> str:
    """Replace the password part of any ``scheme://user:password@host`` in ``text``."""
    return _URL_PASSWORD.sub(lambda m: f"{m['scheme']}{m['user']}:***@", text)


class JsonFormatter(logging.Formatter):
    """Render a record and its ``extra`` fields as one JSON line."""

    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "ts": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "event": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _STD_ATTRS and not key.startswith("_"):
                entry[key] = value
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return scrub(json.dumps(entry, default=str, ensure_ascii=False))


def configure_json_logging(level: str = "INFO") -> None:
    """Route every logger of the process to stderr as JSON lines."""
    if level.upper() not in LOG_LEVELS:
        raise ValueError(f"log level {level!r} is not one of {', '.join(LOG_LEVELS)}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
