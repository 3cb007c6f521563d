"""A message's request body in the batch lane: byte for byte the real-time call's.

The body is what :class:`~workers.analyzer.client.HttpAnalyzer` sends for the message
(``ModelApi.request`` of its kind, what the model is shown of it and the stream's
prompt), so the verdicts of both lanes compare: a transaction as
:func:`~sentinel_platform.shown.shown` shows it (never its truth), an axiom without its
trace context (headers in real time, nothing in a batch).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from sentinel_platform.schemas import Axiom, Transaction
from sentinel_platform.shown import shown
from workers.analyzer.apis.model_api import ModelApi
from workers.analyzer.prompts import Prompt

BodyOf = Callable[[Any], bytes]
TRACE = {"traceparent", "tracestate"}


def kind_and_payload(message: Any) -> tuple[str, dict[str, Any]]:
    """The request's kind and payload for ``message`` (as ``HttpAnalyzer.assess_*``)."""
    if isinstance(message, Transaction):
        return "transaction", shown(message).payload()
    if isinstance(message, Axiom):
        return "axiom", message.model_dump(mode="json", exclude_none=True, exclude=TRACE)
    raise TypeError(f"no batch request for a {type(message).__name__}")


def body_maker(api: ModelApi, prompts: Mapping[str, Prompt]) -> BodyOf:
    """The body of a message's request through ``api`` with the stream's ``prompts``."""

    def body_of(message: Any) -> bytes:
        kind, payload = kind_and_payload(message)
        return api.request(kind, payload, prompts.get(kind))

    return body_of
