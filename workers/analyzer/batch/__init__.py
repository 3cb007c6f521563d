"""The batch lane: the providers' batch APIs, batches cut to their limits, and the
ledger in Redis that makes each verdict of a batch exactly once.

* :mod:`~workers.analyzer.batch.protocol`: :class:`BatchApi` (submit, poll, results) and
  what it answers (:class:`BatchState`, a verdict or a :class:`LineError` per request,
  :class:`BatchFailed` for a whole batch);
* one module per provider: :mod:`~workers.analyzer.batch.openai_batch`,
  :mod:`~workers.analyzer.batch.anthropic_batch`, over
  :mod:`~workers.analyzer.batch.http`;
* :mod:`~workers.analyzer.batch.cutting`: requests cut at a provider's count and byte
  limits (pure);
* :mod:`~workers.analyzer.batch.ledger_state` (pure transitions) and
  :mod:`~workers.analyzer.batch.ledger` (the ledger in Redis).
"""

from workers.analyzer.batch.anthropic_batch import AnthropicBatch
from workers.analyzer.batch.cutting import ANTHROPIC_LIMITS, OPENAI_LIMITS, BatchLimits, cut
from workers.analyzer.batch.http import BatchHttp
from workers.analyzer.batch.ledger import BatchLedger, BatchMissing, BatchRecord, new_local_id
from workers.analyzer.batch.ledger_state import IllegalTransition
from workers.analyzer.batch.openai_batch import OpenAiBatch
from workers.analyzer.batch.protocol import (
    BatchApi,
    BatchFailed,
    BatchRef,
    BatchRequest,
    BatchState,
    LineError,
    Outcome,
    unanswered,
)

__all__ = [
    "ANTHROPIC_LIMITS",
    "OPENAI_LIMITS",
    "AnthropicBatch",
    "BatchApi",
    "BatchFailed",
    "BatchHttp",
    "BatchLedger",
    "BatchLimits",
    "BatchMissing",
    "BatchRecord",
    "BatchRef",
    "BatchRequest",
    "BatchState",
    "IllegalTransition",
    "LineError",
    "OpenAiBatch",
    "Outcome",
    "cut",
    "new_local_id",
    "unanswered",
]
