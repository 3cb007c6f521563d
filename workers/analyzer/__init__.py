"""The analyzer: an optional second opinion for the processors, behind one small interface.

The rules in :mod:`workers.processors` always work; an analyzer (in the original a hosted
model) may know better but can be slow, down, busy or wrong. The package keeps one idea per
module:

* :mod:`workers.analyzer.client`: :class:`HttpAnalyzer`, the HTTP call with its connection
  semaphore, whole-call deadline and reply cap, and :func:`analyzer_from_settings`;
* :mod:`workers.analyzer.replies`: what an answer means (busy, exhausted, down, wrong)
  and the assessment it carries;
* :mod:`workers.analyzer.answers`: every documented refusal of each API, classified;
* :mod:`workers.analyzer.announced_limits`: the budgets an answer's headers announce;
* :mod:`workers.analyzer.health`: the analyzer's health, logged once per change;
* :mod:`workers.analyzer.breaker`: the circuit breaker, a state machine with no I/O;
* :mod:`workers.analyzer.fleet_limits`: the hold and the rate limit every worker of a
  fleet shares through Redis.

Callers import from the package (``from workers.analyzer import HttpAnalyzer``), so the
modules can be rearranged without touching them.
"""

from workers.analyzer.client import (
    MAX_RETRY_AFTER_S,
    Analyzer,
    AnalyzerBusy,
    AnalyzerDown,
    AnalyzerError,
    AnalyzerExhausted,
    AnalyzerTimeout,
    Assessment,
    CircuitOpenError,
    HttpAnalyzer,
    NoFreeConnection,
    analyzer_from_settings,
    parse_assessment,
    retry_after_seconds,
)

__all__ = [
    "MAX_RETRY_AFTER_S",
    "Analyzer",
    "AnalyzerBusy",
    "AnalyzerDown",
    "AnalyzerError",
    "AnalyzerExhausted",
    "AnalyzerTimeout",
    "Assessment",
    "CircuitOpenError",
    "HttpAnalyzer",
    "NoFreeConnection",
    "analyzer_from_settings",
    "parse_assessment",
    "retry_after_seconds",
]
