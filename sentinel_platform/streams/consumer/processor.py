"""The contract between the consumer loop and a domain processor.

The loop owns delivery: reading, recovery, retries, dead letters, acknowledgement. A
processor owns meaning: it parses a message (raising :class:`SchemaError` for anything
that does not fit, which sends the message to the DLQ at once) and turns it into an
:class:`Effect`. The loop then commits the effect, the idempotency marker for the
message's natural key and the XACK in one atomic step, so a redelivered message never
has a second effect.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol


@dataclass(frozen=True)
class Effect:
    """What processing one message produces.

    ``natural_key`` must equal the processor's ``natural_key(message)``: the worker checks
    it before committing, so an effect built for another message (a processor bug) is
    retried and then dead-lettered instead of marking the wrong key done. ``result``
    becomes one entry of the stream's result stream (string fields); ``recent``, when
    set, is pushed on the stream's capped "recent" list (newest first).
    """

    natural_key: str
    result: Mapping[str, str]
    recent: str | None = None
    log_fields: Mapping[str, Any] = field(default_factory=dict)


class Processor(Protocol):
    """A domain processor. Implementations must be safe to call again for the same message.

    Optionally it has ``bind_metrics(metrics)``: the worker calls it once with its
    :class:`~sentinel_platform.streams.consumer.metrics.Metrics` before the first message, so the
    processor can count what only it sees (the analyzer's calls and circuit breaker).
    """

    #: Short name used in logs and metrics ("transactions", "axioms").
    name: str

    def parse(self, fields: Mapping[str, str]) -> Any:
        """Validate a stream entry; raise ``SchemaError`` naming the bad field."""
        ...

    def natural_key(self, message: Any) -> str:
        """The key that makes an effect idempotent (a transaction's id, an axiom's
        source_id + emitted_at)."""
        ...

    def process(self, message: Any) -> Effect:
        """Compute the effect. Any exception leaves the message pending for a retry."""
        ...
