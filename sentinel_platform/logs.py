"""Structured logs: one JSON object per line, with secrets scrubbed.

Workers log events (recovered, dead-lettered, retried, lag written, stopping) with the
stream, group, consumer and message id as fields, so a log query can follow one message
through the pool. Every text of an entry (message, fields, exception) is scrubbed of URL
passwords and ``password=...`` pairs before it is written, whoever produced it; scrubbing
the values rather than the encoded line keeps every line valid JSON.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from types import TracebackType
from typing import Any

from sentinel_platform.redaction import scrub

__all__ = ["LOG_LEVELS", "JsonFormatter", "configure_json_logging", "scrub", "scrubbed"]
_STD_ATTRS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None)).keys()) | {
    "message",
    "asctime",
    "taskName",
}
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def scrubbed(value: Any) -> Any:
    """``value`` with every string in it (nested in dicts, lists and tuples too) scrubbed;
    anything else JSON cannot encode becomes its scrubbed ``str``."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {scrub(str(key)): scrubbed(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [scrubbed(item) for item in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return scrub(str(value))


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
        return json.dumps(scrubbed(entry), ensure_ascii=False)


def _log_uncaught(
    exc_type: type[BaseException], exc: BaseException, tb: TracebackType | None
) -> None:
    if issubclass(exc_type, KeyboardInterrupt):
        sys.__excepthook__(exc_type, exc, tb)
        return
    logging.getLogger("uncaught").critical("uncaught_exception", exc_info=(exc_type, exc, tb))


def _log_uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
    if args.exc_value is None or issubclass(args.exc_type, SystemExit):
        return  # as the default hook: a thread calling sys.exit() is not a crash
    thread = args.thread.name if args.thread else None
    logging.getLogger("uncaught").critical(
        "uncaught_exception",
        exc_info=(args.exc_type, args.exc_value, args.exc_traceback),
        extra={"thread": thread},
    )


def configure_json_logging(level: str = "INFO") -> None:
    """Route every logger of the process to stderr as JSON lines.

    Uncaught exceptions (main thread and other threads) are logged the same way, so even a
    crash's traceback is one scrubbed JSON line rather than raw text on stderr.
    """
    if level.upper() not in LOG_LEVELS:
        raise ValueError(f"log level {level!r} is not one of {', '.join(LOG_LEVELS)}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    sys.excepthook = _log_uncaught
    threading.excepthook = _log_uncaught_in_thread
