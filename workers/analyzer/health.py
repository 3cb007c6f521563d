"""The analyzer's health as one worker sees it, logged and measured once per change.

A worker's threads see the same analyzer state many times a second; operators want one
line when it changes, not one per message. :class:`Health` keeps the last state
(``healthy``, ``busy``, ``unavailable``, ``exhausted``) under a lock and, on a change
only, logs it (``analyzer_busy`` INFO, ``analyzer_unavailable`` WARNING,
``analyzer_exhausted`` ERROR naming its cause, since someone must act: a quota to raise, a
key to replace; ``analyzer_recovered`` INFO on the first success after any) and sets the
``analyzer_exhausted`` gauge (0/1) an alert reads.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from sentinel_platform.streams.consumer.metrics import Metrics

log = logging.getLogger("workers.analyzer.client")


class Health:
    """One analyzer's health for all the threads of one worker; ``fields`` go on every
    line (the redacted URL, the timeout)."""

    def __init__(self, fields: dict[str, Any]) -> None:
        self._fields = fields
        self._lock = threading.Lock()
        self._state = "healthy"
        self._metrics: Metrics | None = None

    @property
    def state(self) -> str:
        with self._lock:
            return self._state

    def bind_metrics(self, metrics: Metrics) -> None:
        """Set the ``analyzer_exhausted`` gauge in ``metrics`` from now on."""
        self._metrics = metrics
        metrics.set_gauge("analyzer_exhausted", 1 if self.state == "exhausted" else 0)

    def now(self, state: str, detail: str, cause: str = "") -> None:
        """The analyzer is in ``state`` now (``detail`` says why; ``cause`` names an
        exhaustion's cause); logged and measured only if that is a change."""
        with self._lock:
            previous, self._state = self._state, state
        if previous == state:
            return
        if self._metrics is not None and "exhausted" in (previous, state):
            self._metrics.set_gauge("analyzer_exhausted", 1 if state == "exhausted" else 0)
        if state == "exhausted":
            log.error("analyzer_exhausted", extra={**self._fields, "cause": cause, "error": detail})
        elif state == "healthy":
            log.info("analyzer_recovered", extra={**self._fields, "was": previous})
        elif state == "busy":
            log.info("analyzer_busy", extra={**self._fields, "reason": detail})
        else:
            log.warning("analyzer_unavailable", extra={**self._fields, "error": detail})
