"""A real HTTP server on 127.0.0.1 speaking OpenAI's Chat Completions and Anthropic's
Messages API as their references document them.

``POST .../chat/completions`` is answered with a ``chat.completion`` object whose
``choices[0].message.content`` is the verdict's JSON, ``POST .../messages`` with a
``message`` whose ``tool_use`` block calls the tool the request forced with the verdict as
its input; both carry the documented ``usage``. Every request is recorded (path, headers
lower-cased, JSON body, when it arrived and, once answered, its status, when and the
tokens it billed), so a test sees the shape the worker sent. ``quota_after`` spends the
quota after that many calls: every later call gets OpenAI's 429 ``insufficient_quota``.
``cut_every`` cuts a share of the answers at ``max_tokens`` (billed in full, no verdict),
and ``billed_tokens`` adds up what every answer's ``usage`` billed. ``refuse_with`` makes
every answer that status with an error body that echoes the key the request carried, in
the body and in a header, as a careless proxy might: nothing the worker shows may repeat
it. ``context_tokens`` refuses a request whose prompt and ``max_tokens`` exceed that
context with the refusal its ``context_dialect`` documents (:func:`context_refusal`).
``accepted_keys`` serves only requests carrying one of those keys and answers any other
with the API's documented 401 (:func:`rejected_key`), as a provider does once a key is
revoked. ``decide`` gives each served call its own verdict from the request's body (a
stub model reading the message it is shown: :func:`shown_message`), and ``model`` names
the model its answers say answered (None: the references' examples). ``script``
answers each call by its number as a test scripts it (status, headers, raw body: a
gateway's, a rate limiter's), or serves it as above where it returns None. The
``model_api_server`` fixture serves one per test. ``down`` makes it a server gone away:
every request's connection is closed with no answer (and not recorded) until it is set
back, as a model server that restarts does to its clients.
"""

from __future__ import annotations

import json
import math
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any

from sentinel_platform_tests.harness.http_serving import serving
from sentinel_platform_tests.harness.model_api_bodies import (
    ANTHROPIC_MODEL,
    ANTHROPIC_RATE_LIMITED,
    INSUFFICIENT_QUOTA,
    OPENAI_MODEL,
    RATE_LIMITED,
    VERDICT,
    anthropic_reply,
    context_refusal,
    openai_reply,
    rejected_key,
    request_key,
    rfc3339_after,
)


@dataclass(frozen=True)
class Scripted:
    """One scripted answer: its status, headers and body, byte for byte."""

    status: int
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    content_type: str = "application/json"


@dataclass
class ModelApiServer:
    """Test double of a hosted model API, but a real server: only its answers are fixed."""

    url: str = ""
    verdict: dict[str, Any] = field(default_factory=lambda: dict(VERDICT))
    #: Close every request's connection without an answer (a server gone away).
    down: bool = False
    #: Answer every request with this status and an error body echoing the key (None: serve).
    refuse_with: int | None = None
    #: The refusal's body instead of the key-echoing one (a server's own error text).
    refusal_body: dict[str, Any] | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)
    #: Serve only these keys (``Authorization: Bearer`` or ``x-api-key``); None: any.
    accepted_keys: frozenset[str] | None = None
    #: Seconds each admitted Chat Completions call takes before its answer.
    latency_s: float = 0.0
    #: Chat Completions only: calls admitted before the quota is spent (None: never);
    #: every later call is answered :data:`INSUFFICIENT_QUOTA`.
    quota_after: int | None = None
    served: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)
    #: A token budget per minute (None: none), from a bucket holding ``bucket_s`` seconds
    #: of it (OpenAI documents that a per-minute limit may be enforced over shorter
    #: periods), refilled continuously; a call beyond it is a 429. Chat Completions
    #: charges as OpenAI does, each call its prompt's tokens plus its ``max_tokens`` at
    #: admission; Messages as Anthropic's input-tokens limit does, the prompt's tokens.
    tokens_per_minute: int | None = None
    bucket_s: float = 60.0
    #: The bucket starts empty (its budget spent elsewhere) instead of full.
    starts_empty: bool = False
    #: Announce the budget on every answer, 429s included, in the dialect's headers:
    #: OpenAI's ``x-ratelimit-*`` (resets as durations), Anthropic's
    #: ``anthropic-ratelimit-*`` (input tokens and their most restrictive ``tokens``,
    #: resets as RFC 3339 times).
    announce: bool = False
    #: The requests-per-minute limit announced beside it (not enforced).
    requests_per_minute: int = 10_000
    #: A model context in tokens (None: unbounded): a request whose prompt (counted as
    #: :meth:`charge` does) and ``max_tokens`` exceed it is refused in ``context_dialect``.
    context_tokens: int | None = None
    #: ``vllm``, ``vllm_max_tokens``, ``vllm_legacy`` or ``openai`` (Chat Completions);
    #: Messages calls are refused in Anthropic's words whatever it says.
    context_dialect: str = "vllm_max_tokens"
    admitted_tokens: int = 0
    rate_limited: int = 0
    #: Every charge: (monotonic time, tokens, admitted).
    charges: list[tuple[float, int, bool]] = field(default_factory=list)
    #: Chat Completions only: every ``cut_every``-th answer (None: none) is cut at the
    #: request's ``max_tokens``, as OpenAI documents it: ``finish_reason: "length"``, the
    #: content a truncated verdict, ``usage`` billing the whole ``max_tokens``.
    cut_every: int | None = None
    cut: int = 0
    #: Tokens every 2xx answer billed (its ``usage``: prompt plus completion).
    billed_tokens: int = 0
    #: The most one answer billed.
    largest_bill: int = 0
    _answered: int = 0
    #: The answer to the call of this number (0 the first), or None: served as usual.
    script: Callable[[int], Scripted | None] | None = None
    _level: float | None = None
    _filled_at: float = 0.0
    #: The verdict of each served call from its request's body (None: :attr:`verdict`).
    decide: Callable[[dict[str, Any]], dict[str, Any]] | None = None
    #: The model the answers name (None: each API reference's example model).
    model: str | None = None

    def verdict_for(self, body: dict[str, Any]) -> dict[str, Any]:
        """The verdict answered to the request ``body``: :attr:`decide`'s, else :attr:`verdict`."""
        return dict(self.verdict) if self.decide is None else self.decide(body)

    def completion(self, verdict: dict[str, Any], body: dict[str, Any], prompt: int) -> Any:
        """The answer to one admitted Chat Completions call, cut at ``max_tokens`` every
        ``cut_every``-th time, its ``usage`` added to :attr:`billed_tokens`."""
        reply = openai_reply(verdict, self.model or OPENAI_MODEL)
        usage = reply["usage"]
        if self.tokens_per_minute is not None or self.cut_every is not None:
            usage["prompt_tokens"] = prompt  # the prompt it charged
            details = usage["prompt_tokens_details"]  # a cached part is part of the prompt
            details["cached_tokens"] = min(details["cached_tokens"], prompt)
        with self.lock:
            self._answered += 1
            cut = self.cut_every is not None and self._answered % self.cut_every == 0
            if cut:
                self.cut += 1
                choice = reply["choices"][0]
                choice["finish_reason"] = "length"
                choice["message"]["content"] = choice["message"]["content"][:20]
                usage["completion_tokens"] = int(body.get("max_tokens") or 16)
            usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
            self.billed_tokens += usage["total_tokens"]
            self.largest_bill = max(self.largest_bill, usage["total_tokens"])
        return reply

    def scripted(self) -> Scripted | None:
        """The scripted answer of the call just recorded (None: serve it)."""
        if self.script is None:
            return None
        with self.lock:
            number = len(self.requests) - 1
        return self.script(number)

    def charge(self, body: dict[str, Any]) -> tuple[bool, int, dict[str, str]]:
        """Admit a Chat Completions call against the budget: (admitted, its prompt
        tokens, the headers)."""
        text = "".join(str(m.get("content", "")) for m in body.get("messages", []))
        prompt = math.ceil(len(text) / 4)
        if self.tokens_per_minute is None:
            return True, prompt, {}
        admitted, level, full_in_s = self._take(prompt + int(body.get("max_tokens") or 0))
        headers = {
            "x-ratelimit-limit-requests": str(self.requests_per_minute),
            "x-ratelimit-remaining-requests": str(self.requests_per_minute - 1),
            "x-ratelimit-reset-requests": "6ms",
            "x-ratelimit-limit-tokens": str(self.tokens_per_minute),
            "x-ratelimit-remaining-tokens": str(int(level)),
            "x-ratelimit-reset-tokens": f"{full_in_s:.3f}s",
        }
        return admitted, prompt, headers if self.announce else {}

    def charge_input(self, body: dict[str, Any]) -> tuple[bool, int, dict[str, str]]:
        """Admit a Messages call against an input-tokens budget: (admitted, its input
        tokens, the headers, resets the whole second by which the bucket is full)."""
        text = json.dumps(body.get("system", "")) + json.dumps(body.get("messages", []))
        prompt = math.ceil(len(text) / 4)
        if self.tokens_per_minute is None:
            return True, prompt, {}
        admitted, level, full_in_s = self._take(prompt)
        full, soon = rfc3339_after(full_in_s), rfc3339_after(0.006)
        headers = {
            "anthropic-ratelimit-requests-limit": str(self.requests_per_minute),
            "anthropic-ratelimit-requests-remaining": str(self.requests_per_minute - 1),
            "anthropic-ratelimit-requests-reset": soon,
        }
        for kind in ("input-tokens", "tokens"):  # no output budget here: input binds
            headers[f"anthropic-ratelimit-{kind}-limit"] = str(self.tokens_per_minute)
            headers[f"anthropic-ratelimit-{kind}-remaining"] = str(int(level))
            headers[f"anthropic-ratelimit-{kind}-reset"] = full
        if not admitted:  # Anthropic's 429 says how long to wait
            rate = self.tokens_per_minute / 60
            headers["retry-after"] = str(max(1, math.ceil((prompt - level) / rate)))
        return admitted, prompt, headers if self.announce or not admitted else {}

    def _take(self, cost: int) -> tuple[bool, float, float]:
        """Take ``cost`` from the bucket if it holds it: (admitted, what is left, seconds
        until it is full again)."""
        assert self.tokens_per_minute is not None
        rate, cap = self.tokens_per_minute / 60, self.tokens_per_minute * self.bucket_s / 60
        with self.lock:
            now = time.monotonic()
            if self._level is None:
                self._level, self._filled_at = (0.0 if self.starts_empty else cap), now
            level = min(cap, self._level + (now - self._filled_at) * rate)
            admitted = level >= cost
            if admitted:
                level -= cost
                self.admitted_tokens += cost
            else:
                self.rate_limited += 1
            self._level, self._filled_at = level, now
            self.charges.append((now, cost, admitted))
        return admitted, level, (cap - level) / rate

    def too_long(self, body: dict[str, Any]) -> dict[str, Any] | None:
        """The refusal of a request past :attr:`context_tokens`, or None when it fits."""
        if self.context_tokens is None:
            return None
        system = body.get("system") or []
        text = "".join(str(m.get("content", "")) for m in body.get("messages", []))
        text += "".join(str(block.get("text", "")) for block in system)
        prompt, completion = math.ceil(len(text) / 4), int(body.get("max_tokens") or 0)
        if prompt + completion <= self.context_tokens:
            return None
        dialect = "anthropic" if system else self.context_dialect
        return context_refusal(dialect, self.context_tokens, prompt, completion)

    def quota_spent(self) -> bool:
        """Whether this call finds the quota spent (else it is counted as admitted)."""
        with self.lock:
            if self.quota_after is not None and self.served >= self.quota_after:
                return True
            self.served += 1
            return False

    def record(self, entry: dict[str, Any]) -> None:
        with self.lock:
            self.requests.append(entry)

    def seen(self) -> list[dict[str, Any]]:
        with self.lock:
            return list(self.requests)


def _handler(state: ModelApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        entry: dict[str, Any]  # this request's record, completed by answer()

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if state.down:  # gone away: the connection closes, nothing is answered
                self.close_connection = True
                return
            headers = {k.lower(): v for k, v in self.headers.items()}
            self.entry = {"path": self.path, "headers": headers, "body": body, "at": time.time()}
            state.record(self.entry)
            key = request_key(headers)
            scripted = state.scripted()
            if scripted is not None:
                self.answer_bytes(scripted)
            elif state.accepted_keys is not None and key not in state.accepted_keys:
                self.answer(401, rejected_key(self.path, key), {})
            elif state.refuse_with is not None:
                key = headers.get("authorization", "").removeprefix("Bearer ")
                key = key or headers.get("x-api-key", "")
                error = {
                    "error": {
                        "message": f"Incorrect API key provided: {key}.",
                        "type": "invalid_request_error",
                        "code": "invalid_api_key",
                    }
                }
                refused = state.refusal_body or error
                self.answer(state.refuse_with, refused, {"x-echoed-key": key})
            elif (too_long := state.too_long(body)) is not None:
                self.answer(400, too_long, {})
            elif self.path.endswith("/chat/completions"):
                if state.quota_spent():  # refused at once, as a refusal runs no model
                    self.answer(429, INSUFFICIENT_QUOTA, {})
                    return
                time.sleep(state.latency_s)
                admitted, prompt, limits = state.charge(body)
                if not admitted:
                    self.answer(429, RATE_LIMITED, limits)
                    return
                reply = state.completion(state.verdict_for(body), body, prompt)
                self.entry["billed"] = reply["usage"]["total_tokens"]
                self.answer(200, reply, limits)
            elif self.path.endswith("/messages"):
                admitted, prompt, limits = state.charge_input(body)
                if not admitted:
                    self.answer(429, ANTHROPIC_RATE_LIMITED, limits)
                    return
                tool, verdict = body["tool_choice"]["name"], state.verdict_for(body)
                reply = anthropic_reply(tool, verdict, state.model or ANTHROPIC_MODEL)
                if state.tokens_per_minute is not None:  # the input it charged
                    reply["usage"]["input_tokens"] = prompt
                self.answer(200, reply, limits)
            else:
                self.answer(404, {"error": "not found"}, {})

        def answer(self, status: int, reply: dict[str, Any], headers: dict[str, str]) -> None:
            self.answer_bytes(Scripted(status, headers, json.dumps(reply).encode()))

        def answer_bytes(self, answer: Scripted) -> None:
            self.send_response(answer.status)
            self.send_header("Content-Type", answer.content_type)
            self.send_header("Content-Length", str(len(answer.body)))
            for name, value in answer.headers.items():
                self.send_header(name, value)
            self.end_headers()
            with state.lock:
                self.entry.update(status=answer.status, answered_at=time.time())
            self.wfile.write(answer.body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


@contextmanager
def serving_model_api() -> Iterator[ModelApiServer]:
    """A :class:`ModelApiServer` on a free local port until the block ends; its ``url`` is
    the API's base URL (``http://127.0.0.1:<port>/v1``)."""
    state = ModelApiServer()
    with serving(_handler(state)) as base:
        state.url = f"{base}/v1"
        yield state
