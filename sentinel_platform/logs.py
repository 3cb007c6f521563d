"""Structured logs: one JSON object per line, with secrets scrubbed.

Workers log events (recovered, dead-lettered, retried, lag written, stopping) with the
stream, group, consumer and message id as fields, so a log query can follow one message
through the fleet. A part of a worker logs through a :class:`BoundLogger`, bound once to
its stream, group and consumer, rather than repeating those fields in every call.

Every text of an entry (message, fields, exception) is scrubbed of URL passwords and
``password=...`` pairs before it is written, whoever produced it; scrubbing the values
rather than the encoded line keeps every line valid JSON.
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Mapping, MutableMapping
from types import TracebackType
from typing import TYPE_CHECKING, Any

from sentinel_platform.redaction import scrub

__all__ = [
    "LOG_LEVELS",
    "BoundLogger",
    "JsonFormatter",
    "configure_json_logging",
    "scrub",
    "scrubbed",
]
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


if TYPE_CHECKING:
    _Adapter = logging.LoggerAdapter[logging.Logger]
else:  # subscriptable at run time only from Python 3.11
    _Adapter = logging.LoggerAdapter


class BoundLogger(_Adapter):
    """A logger whose every line carries the same fields: a worker part's stream, group
    and consumer, bound once where the part is made.

    A call's own ``extra`` is merged over the bound fields (``log.warning("lease_lost",
    extra={"lease": key})`` writes ``stream``, ``group``, ``consumer`` then ``lease``), so
    the lines are exactly those ``extra={**fields, ...}`` wrote: same field names, same
    order, a call's field winning over a bound one of the same name. The record keeps the
    name of the logger it is bound to (each module's own), which :class:`JsonFormatter`
    writes as ``logger``.
    """

    def __init__(self, logger: logging.Logger, fields: Mapping[str, Any]) -> None:
        super().__init__(logger, dict(fields))

    @property
    def fields(self) -> dict[str, Any]:
        """The bound fields (a copy)."""
        return dict(self.extra or {})

    def bind(self, **fields: Any) -> BoundLogger:
        """The same logger with ``fields`` bound as well (a message's id, say)."""
        return BoundLogger(self.logger, {**self.fields, **fields})

    def process(
        self, msg: Any, kwargs: MutableMapping[str, Any]
    ) -> tuple[Any, MutableMapping[str, Any]]:
        kwargs["extra"] = {**self.fields, **(kwargs.get("extra") or {})}
        return msg, kwargs


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
