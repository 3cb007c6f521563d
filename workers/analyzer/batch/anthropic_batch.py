"""Anthropic's Message Batches, for the Messages calls of
:class:`~workers.analyzer.apis.anthropic_api.AnthropicApi`.

A batch is one request, ``POST /v1/messages/batches`` with ``{"requests": [{"custom_id",
"params"}]}``, each ``params`` byte for byte the real-time call's Messages body (the
request is assembled around its bytes, never re-encoded). ``GET
/v1/messages/batches/{id}`` answers its ``processing_status`` (``in_progress``,
``canceling``, then ``ended``) and ``request_counts``; once ended its ``results_url``
serves JSONL, one line per request: ``result.type`` ``succeeded`` carries the
``message``, read by :meth:`AnthropicApi.read` as a real-time reply is; ``errored`` its
error (reason: the error's type and message, scrubbed); ``canceled`` and ``expired``
nothing more. Message Batches keep no metadata, so a batch whose creation went
unanswered cannot be found again (:meth:`AnthropicBatch.find`). A batch Anthropic
refuses is refused at creation (an HTTP error), so none fails as a whole once created.
The key goes only to the configured host: a ``results_url`` elsewhere is read at the
documented path below the configured URL.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import Any
from urllib.parse import urlsplit

from workers.analyzer.answers.refusals import ApiKind
from workers.analyzer.answers.replies import AnalyzerError
from workers.analyzer.apis.anthropic_api import AnthropicApi
from workers.analyzer.batch.cutting import ANTHROPIC_LIMITS, BatchLimits
from workers.analyzer.batch.http import BatchHttp
from workers.analyzer.batch.protocol import (
    BatchCounts,
    BatchRef,
    BatchRequest,
    BatchState,
    BatchStatus,
    LineError,
    LineErrorKind,
    Outcome,
    assessed,
    line_reason,
)
from workers.analyzer.prompts import Prompt

#: ``result.type`` of a request the batch ended before it ran.
UNRUN: dict[str, LineErrorKind] = {"canceled": "canceled", "expired": "expired"}


class AnthropicBatch:
    """:class:`~workers.analyzer.batch.protocol.BatchApi` of Anthropic's Message Batches."""

    kind: ApiKind = "anthropic"
    limits: BatchLimits = ANTHROPIC_LIMITS

    def __init__(self, api: AnthropicApi, http: BatchHttp) -> None:
        self.api, self.http = api, http
        self.batches = f"{api.endpoint(http.base_url)}/batches"

    def entry(self, request: BatchRequest) -> bytes:
        """One element of ``requests``, its ``params`` the real-time call's bytes."""
        head = json.dumps({"custom_id": request.custom_id})[:-1].encode()
        return head + b', "params": ' + request.body + b"}"

    def size(self, request: BatchRequest) -> int:
        return len(self.entry(request)) + 1  # and its comma

    def submit(self, requests: Sequence[BatchRequest], label: str) -> BatchRef:
        """Create the batch (Message Batches keep no metadata: ``label`` stays the
        ledger's)."""
        body = b'{"requests":[' + b",".join(map(self.entry, requests)) + b"]}"
        created = self.http.json("POST", self.batches, body)
        batch_id = created.get("id")
        if not isinstance(batch_id, str) or not batch_id:
            raise AnalyzerError("batch API answered without id")
        return BatchRef(self.kind, batch_id)

    def find(self, label: str, since_s: float) -> BatchRef | None:
        """None: Message Batches keep no label to find a batch by."""
        return None

    def poll(self, ref: BatchRef) -> BatchState:
        return batch_state(ref, self.http.json("GET", f"{self.batches}/{ref.batch_id}"))

    def results(self, ref: BatchRef, prompt: Prompt | None) -> Iterator[tuple[str, Outcome]]:
        batch = self.http.json("GET", f"{self.batches}/{ref.batch_id}")
        state = batch_state(ref, batch)
        if not state.done:
            raise AnalyzerError(f"Anthropic batch {ref.batch_id} is still {state.provider_status}")
        for raw in self.http.lines(self.results_url(ref, batch.get("results_url"))):
            yield line_outcome(self.api, raw, prompt)

    def results_url(self, ref: BatchRef, given: Any) -> str:
        """``given`` when it is on the configured host, else the documented path."""
        ours = f"{self.batches}/{ref.batch_id}/results"
        if isinstance(given, str) and urlsplit(given)[:2] == urlsplit(ours)[:2]:
            return given
        return ours


def batch_state(ref: BatchRef, batch: dict[str, Any]) -> BatchState:
    """What a Message Batch object says (pure)."""
    word = str(batch.get("processing_status") or "")
    raw = batch.get("request_counts")
    counts = raw if isinstance(raw, dict) else {}
    got = {k: int(counts.get(k) or 0) for k in ("processing", "succeeded", "errored")}
    failed = got["errored"] + int(counts.get("canceled") or 0) + int(counts.get("expired") or 0)
    total = got["processing"] + got["succeeded"] + failed
    status: BatchStatus = "ended" if word == "ended" else "in_progress"
    return BatchState(
        ref, status, word, BatchCounts(total, got["succeeded"], failed, got["processing"])
    )


def line_outcome(api: AnthropicApi, raw: bytes, prompt: Prompt | None) -> tuple[str, Outcome]:
    """One results line: its ``custom_id`` and what it came to (pure)."""
    try:
        line = json.loads(raw)
        custom_id, result = str(line["custom_id"]), line["result"]
        kind = result["type"]
    except (ValueError, KeyError, TypeError):
        raise AnalyzerError("a batch results line has no custom_id or result") from None
    if kind == "succeeded":
        return custom_id, assessed(api, json.dumps(result.get("message")).encode(), prompt)
    if kind in UNRUN:
        return custom_id, LineError(UNRUN[kind], f"the batch ended with this request {kind}")
    return custom_id, LineError("errored", error_reason(result.get("error")))


def error_reason(error: Any) -> str:
    """An errored result's ``error`` (an error response: ``{"type": "error", "error":
    {"type", "message"}}``) as ``type: message``, scrubbed."""
    inner = error.get("error") if isinstance(error, dict) else None
    if not isinstance(inner, dict):
        return "errored without a reason"
    return line_reason(str(inner.get("type") or "error"), inner.get("message"))
