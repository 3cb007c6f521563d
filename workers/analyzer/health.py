"""The analyzer's health and breaker as one worker sees them, logged and measured.

A worker's threads see the same analyzer state many times a second; operators want one
line when it changes, not one per message. :class:`Health` keeps the last state
(``healthy``, ``busy``, ``unavailable``, ``exhausted``) under a lock and, on a change
only, logs it (``analyzer_busy`` INFO, ``analyzer_unavailable`` WARNING,
``analyzer_exhausted`` ERROR naming its cause, since someone must act: a quota to raise, a
key to replace; ``analyzer_recovered`` INFO on the first success after any) and sets the
``analyzer_exhausted`` gauge (0/1) an alert reads. It also logs and counts each change of
the circuit breaker (``analyzer_circuit``) and each call's outcome (``analyzer_calls``),
so the client's call path only says what happened.
"""

from __future__ import annotations

import logging
import threading
from typing import Any

from sentinel_platform.streams.consumer.metrics import Metrics
from workers.analyzer.breaker import STATE_VALUES, State, Transition

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

    def bind_metrics(self, metrics: Metrics, breaker: State) -> None:
        """Count calls and breaker changes, and set the gauges, in ``metrics`` from now on
        (``breaker``: the breaker's state now)."""
        self._metrics = metrics
        metrics.set_gauge("analyzer_circuit_state", STATE_VALUES[breaker])
        metrics.set_gauge("analyzer_exhausted", 1 if self.state == "exhausted" else 0)

    def count(self, outcome: str) -> None:
        """Count one call's outcome (``analyzer_calls{outcome}``)."""
        if self._metrics is not None:
            self._metrics.count("analyzer_calls", outcome)

    def breaker_changed(self, transition: Transition | None) -> None:
        """Log and count one change of the breaker (nothing when there was none)."""
        if transition is None:
            return
        fields = {
            "analyzer": self._fields["analyzer"],
            "state": transition.state,
            "previous": transition.previous,
            "reason": transition.reason,
            "cooldown_s": transition.cooldown_s,
        }
        level = logging.WARNING if transition.state == "open" else logging.INFO
        log.log(level, "analyzer_circuit", extra=fields)
        if self._metrics is not None:
            self._metrics.count("analyzer_circuit_changes", transition.state)
            self._metrics.set_gauge("analyzer_circuit_state", STATE_VALUES[transition.state])

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
