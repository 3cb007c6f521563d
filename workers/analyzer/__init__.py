"""The analyzer: an optional second opinion for the processors, behind one small interface.

The rules in :mod:`workers.processors` always work; an analyzer (in the original a hosted
model) may know better but can be slow, down, busy or wrong. The package keeps one idea per
module, in rooms as the consumer has:

* the call, at the top: :mod:`workers.analyzer.client` (:class:`HttpAnalyzer`: whether a
  call may go, through the holds, the breaker and the budgets, and what its outcome means
  to the message), :mod:`workers.analyzer.exchange` (the call itself on the worker's own
  connections, and what the answer asks of the fleet; the reading, with the reply cap, in
  :mod:`workers.analyzer.transport`), :mod:`workers.analyzer.configured` (the analyzer the
  settings describe), :mod:`workers.analyzer.breaker` (the circuit breaker, a state
  machine with no I/O) and :mod:`workers.analyzer.health` (logged once per change);
* :mod:`workers.analyzer.apis`: the protocol of an analyzer API
  (:mod:`~workers.analyzer.apis.model_api`) and one module per API
  (:mod:`~workers.analyzer.apis.sentinel_api`, :mod:`~workers.analyzer.apis.openai_api`,
  :mod:`~workers.analyzer.apis.anthropic_api`), with the model's context
  (:mod:`~workers.analyzer.apis.context_window`: a message too long for it is that
  message's alone); :mod:`workers.analyzer.prompts` the prompts and verdict schemas the
  streams declare;
* :mod:`workers.analyzer.answers`: what an answer means (busy and how long, exhausted,
  down, wrong), as the official SDKs read it, the tokens it billed, the budgets it
  announced, and when a spell of busy answers is an outage;
* :mod:`workers.analyzer.limits`: what the fleet shares through Redis: the hold and the
  call rate, the token budget and its daily cap, announced budgets read as token buckets,
  one first call while nothing is known;
* :mod:`workers.analyzer.keys`: the key in use, re-read when its file changes, held alone
  when it is rejected, shown only as ``sk-...abcd``.

* :mod:`workers.analyzer.lanes`: analyzers made of analyzers, each a wrapper of the one
  :class:`~workers.analyzer.apis.model_api.Analyzer` protocol rather than a branch in the
  client: a second model before the rules (:mod:`~workers.analyzer.lanes.fallback`), a
  model on trial in shadow (:mod:`~workers.analyzer.lanes.shadow`), and the lanes the
  settings describe (:mod:`~workers.analyzer.lanes.configured`).

* :mod:`workers.analyzer.batch` (batch lane, in progress: not yet used by the workers):
  the providers' batch APIs behind one protocol
  (:mod:`~workers.analyzer.batch.protocol`: submit, poll, results; one module per
  provider, :mod:`~workers.analyzer.batch.openai_batch` and
  :mod:`~workers.analyzer.batch.anthropic_batch`), each request the real-time call's
  body byte for byte and each result read by the real-time API's own reading; requests
  cut at the providers' limits (:mod:`~workers.analyzer.batch.cutting`); and the batch
  ledger in Redis (:mod:`~workers.analyzer.batch.ledger`, its states in
  :mod:`~workers.analyzer.batch.ledger_state`): a batch's messages recorded before it
  is submitted, so whoever takes over resumes it rather than submitting it again.
Callers import from the package (``from workers.analyzer import HttpAnalyzer``), so the
modules can be rearranged without touching them.
"""

from workers.analyzer.answers.billed import UnusableAnswer, billed_fields
from workers.analyzer.answers.replies import Usage
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
