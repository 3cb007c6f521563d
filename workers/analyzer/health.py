"""The analyzer's health as one worker sees it, logged and measured once per change.

A worker's threads see the same analyzer state many times a second; operators want one
line when it changes, not one per message. :class:`Health` keeps the last state
(``healthy``, ``busy``, ``unavailable``, ``exhausted``) under a lock and, on a change
only, logs it (``analyzer_busy`` INFO, ``analyzer_unavailable`` WARNING,
``analyzer_exhausted`` ERROR naming its cause, since someone must act: a quota to raise, a
key to replace; ``analyzer_recovered`` INFO on the first success after any) and sets the
``analyzer_exhausted`` gauge (0/1) an alert reads. A success recovers only a call sent
after the latest exhaustion (:attr:`Health.epoch`): with several calls under way, the late
answers of those sent before a quota ran out say nothing about it now, and taken as a
recovery they flapped the gauge (and the alert) to 0 and logged a second ERROR line.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from sentinel_platform.streams.consumer.analyzer_metrics import AnalyzerMeter

log = logging.getLogger("workers.analyzer.client")


class Health:
    """One analyzer's health for all the threads of one worker; ``fields`` go on every
    line (the redacted URL, the timeout)."""

    def __init__(self, fields: dict[str, Any]) -> None:
        self._fields = fields
        self._lock = threading.Lock()
        self._state = "healthy"
        self._exhaustions = 0
        self._meter: AnalyzerMeter | None = None

    def bind(self, fields: dict[str, Any]) -> None:
        """Put ``fields`` (the worker's stream, group, consumer) first on every line."""
        self._fields = {**fields, **self._fields}

    @property
    def state(self) -> str:
        with self._lock:
            return self._state

    @property
    def epoch(self) -> int:
        """The exhaustions met so far: read before a call, handed back with its success."""
        with self._lock:
            return self._exhaustions

    def bind_metrics(self, meter: AnalyzerMeter) -> None:
        """Set the ``analyzer_exhausted`` gauge of this analyzer's role (``meter``) from now on."""
        self._meter = meter
        meter.set_exhausted(self.state == "exhausted")

    def now(
        self, state: str, detail: str, cause: str = "", *, epoch: int | None = None, **fields: Any
    ) -> None:
        """The analyzer is in ``state`` now (``detail`` says why; ``cause`` names an
        exhaustion's cause; ``fields``, a hold's cause and seconds left, go on a busy
        line); logged and measured only if that is a change. ``epoch``: the
        :attr:`epoch` the reporting call was sent at; an exhaustion met since makes its
        news stale, and it is ignored."""
        with self._lock:
            if state == "exhausted":
                self._exhaustions += 1
            elif epoch is not None and epoch != self._exhaustions:
                return
            previous, self._state = self._state, state
        if previous == state:
            return
        if self._meter is not None and "exhausted" in (previous, state):
            self._meter.set_exhausted(state == "exhausted")
        if state == "exhausted":
            log.error("analyzer_exhausted", extra={**self._fields, "cause": cause, "error": detail})
        elif state == "healthy":
            log.info("analyzer_recovered", extra={**self._fields, "was": previous})
        elif state == "busy":
            held = {"cause": cause, **fields} if cause else fields
            log.info("analyzer_busy", extra={**self._fields, "reason": detail, **held})
        else:
            log.warning("analyzer_unavailable", extra={**self._fields, "error": detail})
