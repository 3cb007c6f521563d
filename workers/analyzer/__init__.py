"""The analyzer: an optional second opinion for the processors, behind one small interface.

The rules in :mod:`workers.processors` always work; an analyzer (in the original a hosted
model) may know better but can be slow, down, busy or wrong. The package keeps one idea per
module:

* :mod:`workers.analyzer.client`: :class:`HttpAnalyzer`, the HTTP call with its connection
  semaphore, whole-call deadline and reply cap (its reading in
  :mod:`workers.analyzer.transport`);
* :mod:`workers.analyzer.configured`: :func:`analyzer_from_settings`, the analyzer the
  settings describe;
* :mod:`workers.analyzer.model_api`: the protocol of an analyzer API, one module each:
  :mod:`~workers.analyzer.sentinel_api` (the platform's own contract),
  :mod:`~workers.analyzer.openai_api` (Chat Completions),
  :mod:`~workers.analyzer.anthropic_api` (Messages); :mod:`workers.analyzer.prompts`
  the prompts and verdict schemas the streams declare;
* :mod:`workers.analyzer.replies`: what an answer means (busy, exhausted, down, wrong)
  and the assessment it carries;
* :mod:`workers.analyzer.answers`: every documented refusal of each API, classified;
* :mod:`workers.analyzer.announced_limits`: the budgets an answer's headers announce;
  :mod:`workers.analyzer.announced_bucket`: each read as a token bucket the fleet paces
  from (:mod:`workers.analyzer.token_budget`: the fleet's token budget in Redis);
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
    parse_assessment,
    retry_after_seconds,
)
from workers.analyzer.configured import analyzer_from_settings
from workers.analyzer.prompts import StreamPrompt
from workers.analyzer.replies import Usage

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
    "StreamPrompt",
    "Usage",
    "analyzer_from_settings",
    "parse_assessment",
    "retry_after_seconds",
]
