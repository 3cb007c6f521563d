"""The analyzer: an optional second opinion for the processors, behind one small interface.

The rules in :mod:`workers.processors` always work; an analyzer (in the original a hosted
model) may know better but can be slow, down, busy or wrong. The package keeps one idea per
module:

* :mod:`workers.analyzer.client`: :class:`HttpAnalyzer`, whether a call may go (holds,
  breaker, budgets) and what its outcome means to the message;
  :mod:`workers.analyzer.exchange` the call itself, with its connection semaphore,
  whole-call deadline and what the answer asks of the fleet (its reading, with the
  reply cap, in :mod:`workers.analyzer.transport`);
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
* :mod:`workers.analyzer.billed`: the tokens of an answer billed without a verdict;
* :mod:`workers.analyzer.context_window`: a message too long for the model's context,
  refused as that message's alone (read from each server's refusal, or known before
  sending);
* :mod:`workers.analyzer.waits`: the decision table of statuses and headers, and their
  waits, as the official SDKs read them; :mod:`workers.analyzer.busy_spell` the backoff
  where no wait is given and the bound past which nothing but busy is down;
* :mod:`workers.analyzer.announced_limits`: the budgets an answer's headers announce;
  :mod:`workers.analyzer.announced_bucket`: each read as a token bucket the fleet paces
  from (:mod:`workers.analyzer.token_budget`: the fleet's token budget in Redis;
  :mod:`workers.analyzer.first_call`: one call at a time while the fleet knows nothing);
* :mod:`workers.analyzer.health`: the analyzer's health, logged once per change;
* :mod:`workers.analyzer.breaker`: the circuit breaker, a state machine with no I/O;
* :mod:`workers.analyzer.fleet_limits`: the hold and the rate limit every worker of a
  fleet shares through Redis;
* :mod:`workers.analyzer.key_source`: the key a worker calls with, re-read when its file
  changes; :mod:`workers.analyzer.key_holds` the hold of a rejected key, which holds only
  the workers on that key; :mod:`workers.analyzer.key_fingerprint` what may be shown of
  a key (``sk-...abcd``).

Callers import from the package (``from workers.analyzer import HttpAnalyzer``), so the
modules can be rearranged without touching them.
"""

from workers.analyzer.billed import UnusableAnswer, billed_fields
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
    "UnusableAnswer",
    "Usage",
    "analyzer_from_settings",
    "billed_fields",
    "parse_assessment",
    "retry_after_seconds",
]
