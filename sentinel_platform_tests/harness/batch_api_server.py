"""A real HTTP server on 127.0.0.1 speaking OpenAI's Batch API and Anthropic's Message
Batches as their references document them (the bodies: :mod:`.batch_api_bodies`).

OpenAI: ``POST /v1/files`` takes a multipart upload (``purpose``, ``file``), ``POST
/v1/batches`` creates a batch of an uploaded file, ``GET /v1/batches/{id}`` answers
``validating`` then ``in_progress`` until it has been asked ``polls_to_end`` times, then
``completed`` (``expired`` when some requests expired, ``failed`` with the ``errors`` of
``fail_with`` when ``fail_batch``: its input refused, or the enqueued-token limit),
``GET /v1/files/{id}/content`` serves the output and error files, ``GET /v1/batches``
lists the batches (newest first, ``limit`` and ``after``). Anthropic: ``POST
/v1/messages/batches`` creates a batch (refused with the documented 400 when
``fail_batch``), ``GET /v1/messages/batches/{id}`` answers ``in_progress`` until
``polls_to_end``, then ``ended`` with its ``results_url``, which serves one JSONL line
per request, in reverse order (the reference promises no order). Every
``errored_every``-th and ``expired_every``-th request of a batch (1-based) comes back so
instead of with a verdict. Every request is recorded (method, path, lower-cased headers,
raw body), so a test sees the bytes the worker sent; ``accepted_keys`` answers any other
key with the API's documented 401, which echoes part of the key. The real-time calls a
worker's live stream makes meanwhile (``POST /v1/chat/completions``, ``POST
/v1/messages``) are answered with the verdict as the model API server answers them, each
after ``realtime_latency_s``, so one URL serves both lanes; :meth:`BatchApiServer.submissions`
counts the batches created, and the first ``unanswered_creates`` creations are made but
never answered. With ``batches_at`` (another such server's URL) a server answers only the
real-time calls itself and forwards every other request there byte for byte: the two
lanes of a provider served apart, as a hosted API serves them.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from email.message import Message
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qsl, urlsplit

from sentinel_platform_tests.harness import batch_api_bodies as bodies
from sentinel_platform_tests.harness.http_serving import serving
from sentinel_platform_tests.harness.model_api_bodies import (
    VERDICT,
    anthropic_reply,
    openai_reply,
    rejected_key,
    request_key,
)

#: The paths that create a batch.
CREATE_PATHS = ("/v1/batches", "/v1/messages/batches")
#: The real-time calls' paths.
REALTIME_PATHS = ("/v1/chat/completions", "/v1/messages")
#: How long a forwarded request may take (a batch upload of hundreds of megabytes).
FORWARD_TIMEOUT_S = 120.0


@dataclass
class BatchApiServer:
    """Test double of both providers' batch APIs, but a real server."""

    url: str = ""  # http://127.0.0.1:<port>: OpenAI's base is url + "/v1"
    verdict: dict[str, Any] = field(default_factory=lambda: dict(VERDICT))
    polls_to_end: int = 1
    errored_every: int | None = None
    expired_every: int | None = None
    fail_batch: bool = False
    #: How long each real-time call takes to answer (a hosted model's service time).
    realtime_latency_s: float = 0.0
    #: OpenAI: the code a failed batch's ``errors`` give (:data:`.batch_api_bodies.BATCH_ERRORS`).
    fail_with: str = "invalid_request"
    accepted_keys: frozenset[str] | None = None
    #: This many batch creations are made but never answered (the connection closed).
    unanswered_creates: int = 0
    #: Another server's URL: every request but a real-time call is forwarded there.
    batches_at: str | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    files: dict[str, bytes] = field(default_factory=dict)
    #: Batch id -> {"kind", "custom_ids", "tools", "create", "polls"}.
    batches: dict[str, dict[str, Any]] = field(default_factory=dict)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def line_kind(self, number: int) -> str:
        """What the ``number``-th request of a batch (1-based) comes to."""
        if self.errored_every and number % self.errored_every == 0:
            return "errored"
        if self.expired_every and number % self.expired_every == 0:
            return "expired"
        return "succeeded"

    def next_id(self, prefix: str) -> str:
        with self.lock:
            return f"{prefix}{len(self.files) + len(self.batches) + 1:024d}"

    # OpenAI
    def upload(self, content_type: str, raw: bytes) -> dict[str, Any]:
        form = BytesParser(policy=HTTP).parsebytes(
            f"Content-Type: {content_type}\r\n\r\n".encode() + raw
        )
        parts = {p.get_param("name", header="content-disposition"): p for p in form.iter_parts()}
        data = payload(parts["file"])
        purpose = payload(parts["purpose"]).decode()
        file_id = self.next_id("file-")
        with self.lock:
            self.files[file_id] = data
        return bodies.file_object(file_id, len(data), parts["file"].get_filename() or "", purpose)

    def create_openai(self, create: dict[str, Any]) -> dict[str, Any]:
        lines = [json.loads(line) for line in self.files[create["input_file_id"]].splitlines()]
        batch_id = self.next_id("batch_")
        custom_ids = [line["custom_id"] for line in lines]
        with self.lock:
            self.batches[batch_id] = {
                "kind": "openai",
                "custom_ids": custom_ids,
                "create": create,
                "polls": 0,
                "created_at": int(time.time()),
            }
        return self.openai_object(batch_id, "validating", (len(lines), 0, 0))

    def openai_object(
        self, batch_id: str, status: str, counts: tuple[int, int, int]
    ) -> dict[str, Any]:
        batch = self.batches[batch_id]
        made = bodies.openai_batch(batch_id, batch["create"], status, counts)
        return {**made, "created_at": batch["created_at"]}

    def list_openai(self, query: dict[str, str]) -> dict[str, Any]:
        """``GET /v1/batches``: the batches newest first, ``limit`` of them after the
        id ``after``, as OpenAI's list object."""
        with self.lock:
            ids = [i for i, b in reversed(self.batches.items()) if b["kind"] == "openai"]
        if "after" in query:
            ids = ids[ids.index(query["after"]) + 1 :]
        limit = int(query.get("limit", 20))
        page = [self.openai_object(i, "in_progress", (0, 0, 0)) for i in ids[:limit]]
        return {
            "object": "list",
            "data": page,
            "first_id": page[0]["id"] if page else None,
            "last_id": page[-1]["id"] if page else None,
            "has_more": len(ids) > limit,
        }

    def poll_openai(self, batch_id: str) -> dict[str, Any]:
        batch = self.polled(batch_id)
        custom_ids = batch["custom_ids"]
        if batch["polls"] < self.polls_to_end:
            return self.openai_object(batch_id, "in_progress", (len(custom_ids), 0, 0))
        if self.fail_batch:
            failed = self.openai_object(batch_id, "failed", (0, 0, 0))
            return {**failed, "errors": bodies.batch_errors(self.fail_with)}
        output, errors = self.openai_files(batch_id, custom_ids)
        kinds = [self.line_kind(n) for n in range(1, len(custom_ids) + 1)]
        status = "expired" if "expired" in kinds else "completed"
        done = kinds.count("succeeded")
        answer = self.openai_object(batch_id, status, (len(kinds), done, len(kinds) - done))
        return {**answer, "output_file_id": output, "error_file_id": errors}

    def openai_files(self, batch_id: str, custom_ids: list[str]) -> tuple[str | None, str | None]:
        """The batch's output and error files (None for an empty one), made once."""
        output, errors = [], []
        for number, custom_id in enumerate(custom_ids, 1):
            kind = self.line_kind(number)
            if kind == "succeeded":
                output.append(bodies.openai_output_line(number, custom_id, self.verdict))
            else:
                errors.append(bodies.openai_error_line(number, custom_id, kind))
        made = []
        for name, lines in (("output", output), ("errors", errors)):
            file_id = f"file-{name}-{batch_id}" if lines else None
            if file_id:
                with self.lock:
                    self.files[file_id] = b"".join(
                        json.dumps(line).encode() + b"\n" for line in lines
                    )
            made.append(file_id)
        return made[0], made[1]

    # Anthropic
    def create_anthropic(self, body: dict[str, Any]) -> dict[str, Any]:
        batch_id = self.next_id("msgbatch_")
        requests = body["requests"]
        batch = {
            "kind": "anthropic",
            "custom_ids": [r["custom_id"] for r in requests],
            "tools": [r["params"]["tool_choice"]["name"] for r in requests],
            "polls": 0,
        }
        with self.lock:
            self.batches[batch_id] = batch
        return bodies.anthropic_batch(
            batch_id, self.anthropic_counts(batch, False), False, self.url
        )

    def poll_anthropic(self, batch_id: str) -> dict[str, Any]:
        batch = self.polled(batch_id)
        ended = batch["polls"] >= self.polls_to_end
        return bodies.anthropic_batch(
            batch_id, self.anthropic_counts(batch, ended), ended, self.url
        )

    def anthropic_counts(self, batch: dict[str, Any], ended: bool) -> dict[str, int]:
        counts = dict.fromkeys(("processing", "succeeded", "errored", "canceled", "expired"), 0)
        for number in range(1, len(batch["custom_ids"]) + 1):
            counts[self.line_kind(number) if ended else "processing"] += 1
        return counts

    def anthropic_results(self, batch_id: str) -> bytes:
        batch = self.batches[batch_id]
        lines = [
            bodies.anthropic_result(custom_id, self.line_kind(number), tool, self.verdict)
            for number, (custom_id, tool) in enumerate(
                zip(batch["custom_ids"], batch["tools"], strict=True), 1
            )
        ]
        return b"".join(json.dumps(line).encode() + b"\n" for line in reversed(lines))

    def polled(self, batch_id: str) -> dict[str, Any]:
        with self.lock:
            batch = self.batches[batch_id]
            batch["polls"] += 1
            return batch

    def record(self, entry: dict[str, Any]) -> None:
        with self.lock:
            self.requests.append(entry)

    def answers_create(self) -> bool:
        """Whether this creation is answered (False for the first ``unanswered_creates``)."""
        with self.lock:
            if self.unanswered_creates > 0:
                self.unanswered_creates -= 1
                return False
            return True

    def submissions(self) -> int:
        """How many batches were created (each a submission the provider bills)."""
        return sum(1 for r in self.seen("POST") if r["path"] in CREATE_PATHS)

    def realtime_calls(self) -> int:
        """How many real-time calls were answered."""
        return sum(1 for r in self.seen("POST") if r["path"] in REALTIME_PATHS)

    def seen(self, method: str | None = None) -> list[dict[str, Any]]:
        with self.lock:
            return [r for r in self.requests if method is None or r["method"] == method]


def payload(part: Message) -> bytes:
    """A multipart part's content, as sent."""
    data = part.get_payload(decode=True)
    assert isinstance(data, bytes), "a multipart part without content"
    return data


def _handler(state: BatchApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self) -> None:
            self.serve("GET", b"")

        def do_POST(self) -> None:
            self.serve("POST", self.rfile.read(int(self.headers.get("Content-Length") or 0)))

        def serve(self, method: str, raw: bytes) -> None:
            headers = {k.lower(): v for k, v in self.headers.items()}
            if state.batches_at and self.path not in REALTIME_PATHS:
                self.forward(state.batches_at, method, headers, raw)
                return
            state.record({"method": method, "path": self.path, "headers": headers, "body": raw})
            key, anthropic = request_key(headers), self.path.startswith("/v1/messages")
            if state.accepted_keys is not None and key not in state.accepted_keys:
                self.answer(401, rejected_key("/messages" if anthropic else self.path, key))
                return
            where = urlsplit(self.path)
            parts, query = where.path.strip("/").split("/"), dict(parse_qsl(where.query))
            try:
                self.route(method, parts, query, headers, raw)
            except KeyError:
                self.answer(
                    404, {"error": {"message": "No such object", "type": "invalid_request_error"}}
                )

        def route(
            self,
            method: str,
            parts: list[str],
            query: dict[str, str],
            headers: dict[str, str],
            raw: bytes,
        ) -> None:
            match method, parts:
                case "POST", ["v1", "files"]:
                    self.answer(200, state.upload(headers["content-type"], raw))
                case "POST", ["v1", "batches"]:
                    self.created(state.create_openai(json.loads(raw)))
                case "GET", ["v1", "batches"]:
                    self.answer(200, state.list_openai(query))
                case "GET", ["v1", "batches", batch_id]:
                    self.answer(200, state.poll_openai(batch_id))
                case "GET", ["v1", "files", file_id, "content"]:
                    self.answer_bytes(200, state.files[file_id], "application/octet-stream")
                case "POST", ["v1", "messages", "batches"]:
                    if state.fail_batch:
                        self.answer(400, bodies.ANTHROPIC_INVALID_BATCH)
                    else:
                        self.created(state.create_anthropic(json.loads(raw)))
                case "POST", ["v1", "chat", "completions"]:
                    time.sleep(state.realtime_latency_s)
                    self.answer(200, openai_reply(state.verdict))
                case "POST", ["v1", "messages"]:
                    time.sleep(state.realtime_latency_s)
                    tool = json.loads(raw)["tool_choice"]["name"]
                    self.answer(200, anthropic_reply(tool, state.verdict))
                case "GET", ["v1", "messages", "batches", batch_id]:
                    self.answer(200, state.poll_anthropic(batch_id))
                case "GET", ["v1", "messages", "batches", batch_id, "results"]:
                    self.answer_bytes(200, state.anthropic_results(batch_id), "application/binary")
                case _:
                    raise KeyError(self.path)

        def forward(self, to: str, method: str, headers: dict[str, str], raw: bytes) -> None:
            """The request sent on to ``to`` as it came; its answer sent back as it came
            (a connection closed unanswered is closed here too)."""
            where = urlsplit(to)
            upstream = http.client.HTTPConnection(
                where.hostname or "127.0.0.1", where.port, timeout=FORWARD_TIMEOUT_S
            )
            try:
                sent = {k: v for k, v in headers.items() if k not in ("host", "connection")}
                upstream.request(method, self.path, body=raw or None, headers=sent)
                reply = upstream.getresponse()
                body = reply.read()
            except (http.client.RemoteDisconnected, ConnectionError):
                self.close_connection = True
                return
            finally:
                upstream.close()
            self.answer_bytes(reply.status, body, reply.getheader("Content-Type") or "")

        def created(self, batch: dict[str, Any]) -> None:
            """A batch was created: answered, or the connection closed unanswered."""
            if state.answers_create():
                self.answer(200, batch)
            else:
                self.close_connection = True

        def answer(self, status: int, reply: dict[str, Any]) -> None:
            self.answer_bytes(status, json.dumps(reply).encode(), "application/json")

        def answer_bytes(self, status: int, body: bytes, content_type: str) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


@contextmanager
def serving_batch_api() -> Iterator[BatchApiServer]:
    """A :class:`BatchApiServer` on a free local port until the block ends."""
    state = BatchApiServer()
    with serving(_handler(state)) as base:
        state.url = f"{base}"
        yield state
