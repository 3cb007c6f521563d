"""The answers of the batch API server (:mod:`~sentinel_platform_tests.harness.batch_api_server`)
as the providers document them, written from their API references: OpenAI's File and
Batch objects and the lines of a batch's output and error files (Batch API reference,
"The request output object"), Anthropic's Message Batch object and the lines of its
results (Message Batches reference, "Retrieve Message Batch results").
"""

from __future__ import annotations

import time
from datetime import datetime, timedelta, timezone
from typing import Any

from sentinel_platform_tests.harness.model_api_bodies import anthropic_reply, openai_reply

#: OpenAI's message for a request the completion window ended before it ran.
EXPIRED_MESSAGE = "This request could not be executed before the completion window expired."
#: An error body a request of a batch may get (OpenAI's documented 500).
SERVER_ERROR = {
    "error": {
        "message": "The server had an error while processing your request. Sorry about that!",
        "type": "server_error",
        "param": None,
        "code": None,
    }
}
#: Anthropic's documented error response, as an errored result carries it.
ANTHROPIC_OVERLOADED = {
    "type": "error",
    "error": {"type": "overloaded_error", "message": "Overloaded"},
}
#: Anthropic's documented 400 for a batch it refuses at creation.
ANTHROPIC_INVALID_BATCH = {
    "type": "error",
    "error": {
        "type": "invalid_request_error",
        "message": "requests.0.params.max_tokens: Field required",
    },
}


def file_object(file_id: str, size: int, filename: str, purpose: str) -> dict[str, Any]:
    """OpenAI's File object of an uploaded file."""
    return {
        "id": file_id,
        "object": "file",
        "bytes": size,
        "created_at": int(time.time()),
        "filename": filename,
        "purpose": purpose,
        "status": "processed",
        "expires_at": None,
        "status_details": None,
    }


def openai_batch(
    batch_id: str, create: dict[str, Any], status: str, counts: tuple[int, int, int]
) -> dict[str, Any]:
    """OpenAI's Batch object for a batch created with ``create``; ``counts`` are
    ``(total, completed, failed)``. The timestamps and files are set by the caller."""
    now = int(time.time())
    total, completed, failed = counts
    return {
        "id": batch_id,
        "object": "batch",
        "endpoint": create["endpoint"],
        "errors": None,
        "input_file_id": create["input_file_id"],
        "completion_window": create["completion_window"],
        "status": status,
        "output_file_id": None,
        "error_file_id": None,
        "created_at": now,
        "in_progress_at": None,
        "expires_at": now + 24 * 3600,
        "finalizing_at": None,
        "completed_at": None,
        "failed_at": None,
        "expired_at": None,
        "cancelling_at": None,
        "cancelled_at": None,
        "request_counts": {"total": total, "completed": completed, "failed": failed},
        "metadata": create.get("metadata"),
    }


#: What a failed batch's ``errors`` say, by code: its input refused at validation, or
#: the organisation's enqueued-token limit reached (as OpenAI answers it, quoted in
#: openai/openai-python#2084).
BATCH_ERRORS = {
    "invalid_request": (
        "The `model` parameter is required for every request in the input file.",
        "body.model",
        1,
    ),
    "token_limit_exceeded": (
        "Enqueued token limit reached for gpt-4o-mini in organization org-x. Limit: "
        "2,000,000 enqueued tokens. Please try again once some in_progress batches have "
        "been completed.",
        None,
        None,
    ),
}


def batch_errors(code: str) -> dict[str, Any]:
    """The ``errors`` of a batch that failed for ``code`` (:data:`BATCH_ERRORS`)."""
    message, param, line = BATCH_ERRORS[code]
    return {
        "object": "list",
        "data": [{"code": code, "message": message, "param": param, "line": line}],
    }


def openai_output_line(number: int, custom_id: str, verdict: dict[str, Any]) -> dict[str, Any]:
    """An output file line: the request's Chat Completions reply."""
    return {
        "id": f"batch_req_{number:024d}",
        "custom_id": custom_id,
        "response": {
            "status_code": 200,
            "request_id": f"req_{number:032x}",
            "body": openai_reply(verdict),
        },
        "error": None,
    }


def openai_error_line(number: int, custom_id: str, kind: str) -> dict[str, Any]:
    """An error file line: a request ``expired`` (the window ended before it ran) or
    ``errored`` (its call answered HTTP 500)."""
    line: dict[str, Any] = {"id": f"batch_req_{number:024d}", "custom_id": custom_id}
    if kind == "expired":
        return {
            **line,
            "response": None,
            "error": {"code": "batch_expired", "message": EXPIRED_MESSAGE},
        }
    response = {"status_code": 500, "request_id": f"req_{number:032x}", "body": SERVER_ERROR}
    return {**line, "response": response, "error": None}


def rfc3339(at: datetime) -> str:
    return at.isoformat().replace("+00:00", "Z")


def anthropic_batch(
    batch_id: str, counts: dict[str, int], ended: bool, base: str
) -> dict[str, Any]:
    """Anthropic's Message Batch object; ``counts`` its ``request_counts``."""
    now = datetime.now(timezone.utc)
    return {
        "id": batch_id,
        "type": "message_batch",
        "processing_status": "ended" if ended else "in_progress",
        "request_counts": counts,
        "ended_at": rfc3339(now) if ended else None,
        "created_at": rfc3339(now),
        "expires_at": rfc3339(now + timedelta(hours=24)),
        "archived_at": None,
        "cancel_initiated_at": None,
        "results_url": f"{base}/v1/messages/batches/{batch_id}/results" if ended else None,
    }


def anthropic_result(
    custom_id: str, kind: str, tool: str, verdict: dict[str, Any]
) -> dict[str, Any]:
    """One results line: ``succeeded`` with the Messages reply, ``errored`` with an
    error response, ``expired`` or ``canceled`` with nothing more."""
    if kind == "succeeded":
        result: dict[str, Any] = {"type": "succeeded", "message": anthropic_reply(tool, verdict)}
    elif kind == "errored":
        result = {"type": "errored", "error": ANTHROPIC_OVERLOADED}
    else:
        result = {"type": kind}
    return {"custom_id": custom_id, "result": result}
