"""The re-screen's processor: a queued message, decided again by the model alone.

It wraps the stream's live processor (:class:`~workers.processors.base.WireProcessor`)
and its analyzer (the same instance: the same connections, fleet limits, breaker and
budget). A queue entry is the message's wire fields and the queue's own
(:func:`~sentinel_platform.streams.backlog.provisional.payload_of`); one that lacks
those or whose message does not parse is a :class:`SchemaError`, dead-lettered at once.
The live processor is called with ``model_only``: where the analyzer cannot be asked the
entry waits (a :class:`Busy`), and where the model gives no verdict for a reason of the
message's own it is dead-lettered; it never gets a second rules verdict. The model's
verdict is written as the stream's result with ``rescreen_of`` (the provisional verdict
it supersedes) and that verdict's ``source_message_id``.

The natural key is the provisional verdict's entry id: one re-screen per provisional
verdict, however often it was queued (a day queued again by hand).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sentinel_platform.registry import WireModel
from sentinel_platform.schemas import SchemaError
from sentinel_platform.streams.backlog.provisional import (
    QUEUE_CAUSE,
    QUEUE_RESULT_ID,
    QUEUE_SOURCE_ID,
    RESCREEN_OF,
    payload_of,
)
from sentinel_platform.streams.consumer.processor import Effect, Unprocessable
from workers.processors.base import WireProcessor

ENTRY = "RescreenEntry"


@dataclass(frozen=True)
class Queued:
    """One queue entry: the message, the provisional verdict's entry id, the message's id."""

    message: WireModel
    rescreen_of: str
    source_id: str
    cause: str


class RescreenProcessor:
    """Decides a queued message again with ``live``'s analyzer (see the module)."""

    #: the analyzer's calls are paid for: one call per key across the fleet (``Claims``)
    paid_calls = True

    def __init__(self, live: WireProcessor[Any]) -> None:
        if live.analyzer is None:
            raise ValueError(f"processor {live.name} has no analyzer to re-screen with")
        self.live = live
        self.name = f"{live.name}_rescreen"

    def parse(self, fields: Mapping[str, str]) -> Queued:
        """The queue entry (``SchemaError`` naming a missing field or the message's bad one)."""
        for name in (QUEUE_RESULT_ID, QUEUE_SOURCE_ID):
            if not fields.get(name):
                raise SchemaError(ENTRY, name, "field is missing")
        message = self.live.parse(payload_of(fields))
        cause = fields.get(QUEUE_CAUSE, "")
        return Queued(message, fields[QUEUE_RESULT_ID], fields[QUEUE_SOURCE_ID], cause)

    def natural_key(self, entry: Queued) -> str:
        return entry.rescreen_of

    def process(self, entry: Queued) -> Effect:
        """The model's verdict, superseding the provisional one; raises what the live
        processor raises with ``model_only`` (the entry waits or is dead-lettered)."""
        effect = self.live.process(entry.message, model_only=True)
        driver = effect.result.get("driver_used")
        if driver != "analyzer":  # a demo entry, an axiom below the audit: never queued
            raise Unprocessable(f"re-screen: the message is decided by the {driver}")
        result = {
            **effect.result,
            RESCREEN_OF: entry.rescreen_of,
            "source_message_id": entry.source_id,
        }
        fields = {**effect.log_fields, RESCREEN_OF: entry.rescreen_of, "cause": entry.cause}
        return Effect(entry.rescreen_of, result, None, fields, effect.sample)
