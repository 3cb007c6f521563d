"""OpenAI's Batch API, for the Chat Completions calls of
:class:`~workers.analyzer.apis.openai_api.OpenAiApi`.

A batch is a JSONL file, one line per request, ``{"custom_id", "method": "POST", "url":
"/v1/chat/completions", "body"}``, the body byte for byte the real-time call's (the line
is assembled around its bytes, never re-encoded). The file is uploaded to ``/files``
(multipart, ``purpose`` ``batch``), the batch created at ``/batches`` with its
``input_file_id``, the endpoint and ``completion_window`` ``24h`` (the ledger's id of it
as ``metadata``, so a batch whose creation went unanswered can be found in the
provider's list: :meth:`OpenAiBatch.find`). ``GET /batches/{id}`` answers its
``status``: ``validating``, ``in_progress``, ``finalizing``, ``cancelling`` are still at
the provider; ``completed``, ``expired`` and ``cancelled`` have results (an expired or
cancelled batch its finished part); ``failed`` (its input refused) has none and is
:class:`BatchFailed`; one failed for the enqueued-token limit (``token_limit_exceeded``)
is ``held``: the provider's queue is full, nothing is wrong with its requests. Results
are the lines of ``output_file_id`` and then ``error_file_id``, each keyed by
``custom_id``: a ``response`` with ``status_code`` 200 carries the Chat Completions
reply, read by :meth:`OpenAiApi.read` as a real-time reply is; an ``error`` coded
``batch_expired`` or ``batch_cancelled`` is that request expired or canceled; any other
error or status is ``errored``, its reason read as a real-time refusal of the same
status would be.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from datetime import datetime, timezone
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from urllib3 import encode_multipart_formdata

from workers.analyzer.answers.refusals import ApiKind, refusal
from workers.analyzer.answers.replies import AnalyzerError
from workers.analyzer.apis.model_api import endpoint
from workers.analyzer.apis.openai_api import PATH, OpenAiApi
from workers.analyzer.batch.cutting import OPENAI_LIMITS, BatchLimits
from workers.analyzer.batch.http import BatchHttp
from workers.analyzer.batch.protocol import (
    BatchCounts,
    BatchFailed,
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

ENDPOINT = "/v1/chat/completions"
COMPLETION_WINDOW = "24h"
STILL_RUNNING = frozenset({"validating", "in_progress", "finalizing", "cancelling"})
#: Batches listed per page, and the most pages read looking for one batch.
LIST_PAGE = 100
MAX_LIST_PAGES = 20
#: The error code of a batch failed for the organisation's enqueued-token limit.
ENQUEUED_LIMIT = "token_limit_exceeded"
#: Error codes of a line the batch ended before it ran.
LINE_ERROR_KINDS: dict[str, LineErrorKind] = {
    "batch_expired": "expired",
    "batch_cancelled": "canceled",
}


class OpenAiBatch:
    """:class:`~workers.analyzer.batch.protocol.BatchApi` of OpenAI's Batch API."""

    kind: ApiKind = "openai"
    limits: BatchLimits = OPENAI_LIMITS

    def __init__(self, api: OpenAiApi, http: BatchHttp) -> None:
        self.api, self.http = api, http
        self.root = api_root(http.base_url)

    def line(self, request: BatchRequest) -> bytes:
        """The request's JSONL line (no newline), its body as the real-time call's bytes."""
        head = {"custom_id": request.custom_id, "method": "POST", "url": ENDPOINT}
        return json.dumps(head)[:-1].encode() + b', "body": ' + request.body + b"}"

    def size(self, request: BatchRequest) -> int:
        return len(self.line(request)) + 1

    def submit(self, requests: Sequence[BatchRequest], label: str) -> BatchRef:
        content = b"".join(self.line(request) + b"\n" for request in requests)
        form, content_type = encode_multipart_formdata(
            {"purpose": "batch", "file": ("sentinel-batch.jsonl", content, "application/jsonl")}
        )
        uploaded = self.http.json("POST", f"{self.root}/files", form, content_type)
        create = {
            "input_file_id": text(uploaded, "id"),
            "endpoint": ENDPOINT,
            "completion_window": COMPLETION_WINDOW,
            "metadata": {"sentinel_batch": label},
        }
        created = self.http.json("POST", f"{self.root}/batches", json.dumps(create).encode())
        return BatchRef(self.kind, text(created, "id"))

    def find(self, label: str, since_s: float) -> BatchRef | None:
        """The batch whose ``metadata`` names ``label``, from the provider's list (newest
        first, a page at a time) down to those created before ``since_s``."""
        after = ""
        for _ in range(MAX_LIST_PAGES):
            query = f"?limit={LIST_PAGE}" + (f"&after={after}" if after else "")
            page = self.http.json("GET", f"{self.root}/batches{query}")
            found, after, done = labelled(page, label, since_s)
            if found is not None:
                return BatchRef(self.kind, found)
            if done:
                return None
        return None

    def poll(self, ref: BatchRef) -> BatchState:
        return batch_state(ref, self.http.json("GET", f"{self.root}/batches/{ref.batch_id}"))

    def results(self, ref: BatchRef, prompt: Prompt | None) -> Iterator[tuple[str, Outcome]]:
        batch = self.http.json("GET", f"{self.root}/batches/{ref.batch_id}")
        state = batch_state(ref, batch)
        if state.status == "failed":
            raise BatchFailed(f"OpenAI batch {ref.batch_id} failed: {state.reason}")
        if not state.done:
            raise AnalyzerError(f"OpenAI batch {ref.batch_id} is still {state.provider_status}")
        for field in ("output_file_id", "error_file_id"):
            file_id = batch.get(field)
            if isinstance(file_id, str) and file_id:
                for raw in self.http.lines(f"{self.root}/files/{file_id}/content"):
                    yield line_outcome(self.api, raw, prompt)


def api_root(base_url: str) -> str:
    """The API's root below ``base_url`` (``.../v1``), a Chat Completions URL taken back
    to it; the Batch API's paths go below it (a query, Azure's ``api-version``, is not
    carried over: Azure's batch deployments are not wired yet)."""
    parts = urlsplit(endpoint(base_url, PATH))
    return urlunsplit((parts.scheme, parts.netloc, parts.path[: -len(PATH)], "", ""))


def labelled(page: dict[str, Any], label: str, since_s: float) -> tuple[str | None, str, bool]:
    """One page of the batches list (pure): the id of the batch labelled ``label``, the
    id to list after, and whether the list ends here (no more, or older than
    ``since_s``)."""
    data = page.get("data")
    batches = [b for b in data if isinstance(b, dict)] if isinstance(data, list) else []
    for batch in batches:
        metadata = batch.get("metadata")
        if isinstance(metadata, dict) and metadata.get("sentinel_batch") == label:
            return str(batch.get("id") or ""), "", True
    oldest = min((float(b.get("created_at") or 0) for b in batches), default=0.0)
    last = str(page.get("last_id") or "")
    return None, last, not page.get("has_more") or not last or oldest < since_s


def text(reply: dict[str, Any], name: str) -> str:
    value = reply.get(name)
    if not isinstance(value, str) or not value:
        raise AnalyzerError(f"batch API answered without {name}")
    return value


def batch_state(ref: BatchRef, batch: dict[str, Any]) -> BatchState:
    """What a Batch object says (pure)."""
    word = str(batch.get("status") or "")
    raw = batch.get("request_counts")
    counts = raw if isinstance(raw, dict) else {}
    total, done, failed = (int(counts.get(k) or 0) for k in ("total", "completed", "failed"))
    status: BatchStatus = "in_progress" if word in STILL_RUNNING else "ended"
    reason = first_error(batch.get("errors")) if word == "failed" else ""
    if word == "failed":
        status = "failed"
    numbers = BatchCounts(total, done, failed, max(0, total - done - failed))
    return BatchState(ref, status, word, numbers, reason, reason.startswith(ENQUEUED_LIMIT))


def first_error(errors: Any) -> str:
    """The first of a failed batch's ``errors.data`` as ``code: message (line n)``."""
    data = errors.get("data") if isinstance(errors, dict) else None
    if not isinstance(data, list) or not data or not isinstance(data[0], dict):
        return "no reason given"
    first = data[0]
    line = f" (line {first['line']})" if first.get("line") is not None else ""
    return line_reason(str(first.get("code") or "error"), first.get("message")) + line


def line_outcome(api: OpenAiApi, raw: bytes, prompt: Prompt | None) -> tuple[str, Outcome]:
    """One results line: its ``custom_id`` and what it came to (pure)."""
    try:
        line = json.loads(raw)
        custom_id = line["custom_id"]
    except (ValueError, KeyError, TypeError):
        raise AnalyzerError("a batch results line has no custom_id") from None
    return str(custom_id), outcome_of(api, line, prompt)


def outcome_of(api: OpenAiApi, line: dict[str, Any], prompt: Prompt | None) -> Outcome:
    response, error = line.get("response"), line.get("error")
    if isinstance(error, dict):
        word = str(error.get("code") or "error")
        return LineError(
            LINE_ERROR_KINDS.get(word, "errored"), line_reason(word, error.get("message"))
        )
    if not isinstance(response, dict):
        return LineError("errored", "results line has neither response nor error")
    status, body = response.get("status_code"), json.dumps(response.get("body")).encode()
    if status != 200:
        code = status if isinstance(status, int) else 500
        now = datetime.now(timezone.utc)
        meaning = api.misconfigured(code, body) or refusal(api.kind, code, {}, body, now)
        return LineError("errored", f"HTTP {code}: {meaning}")
    return assessed(api, body, prompt)
