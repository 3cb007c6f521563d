"""One small protocol per analyzer API: build the request, read the reply into a verdict.

:class:`~workers.analyzer.client.HttpAnalyzer` is the transport (its connection semaphore,
whole-call deadline, 64 KiB reply cap, breaker and fleet limits); what differs between
APIs is only the request's path, headers and body and how a 2xx reply becomes an
:class:`~workers.analyzer.answers.replies.Assessment`. Each API is one module
(:mod:`~workers.analyzer.apis.sentinel_api`, :mod:`~workers.analyzer.apis.openai_api`,
:mod:`~workers.analyzer.apis.anthropic_api`) implementing :class:`ModelApi`; the refusals
(non-2xx) of every API are read by :func:`workers.analyzer.answers.refusals.refusal`.

The helpers here are what the model APIs share: the endpoint below a base URL, the
validation of a verdict against its prompt's model (a reply that does not validate is
"wrong": :class:`~workers.analyzer.answers.replies.AnalyzerError`) and reading a JSON reply.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ValidationError

from sentinel_platform.schemas import Axiom, Transaction
from workers.analyzer.answers.billed import billed
from workers.analyzer.answers.refusals import ApiKind
from workers.analyzer.answers.replies import (
    NARRATIVE_MAX_CHARS,
    AnalyzerError,
    AnalyzerExhausted,
    Assessment,
    Usage,
    json_reply,
)
from workers.analyzer.apis.context_window import ContextWindow, context_error
from workers.analyzer.prompts import Prompt

__all__ = [
    "Analyzer",
    "ApiKind",
    "ModelApi",
    "endpoint",
    "json_body",
    "json_reply",
    "refused_request",
    "verdict_from",
]

#: Statuses servers answer a request they cannot take with (llama.cpp's Python server
#: answers an unsupported ``response_format`` with 500).
REFUSING_STATUSES = frozenset({400, 404, 422, 500})
#: Words of a refusal (lower-cased) that name what the recipe sends, and the setting that
#: changes it.
REFUSED_PARTS = {
    "response_format": "SENTINEL_ANALYZER_RESPONSE_FORMAT",
    "json_schema": "SENTINEL_ANALYZER_RESPONSE_FORMAT",
    "response_schema": "SENTINEL_ANALYZER_RESPONSE_FORMAT",  # Gemini's name for it
    "additionalproperties": "SENTINEL_ANALYZER_RESPONSE_FORMAT",
    "max_tokens": "SENTINEL_ANALYZER_MAX_OUTPUT_TOKENS",
    "temperature": "SENTINEL_ANALYZER_MODEL",
    "tool_choice": "SENTINEL_ANALYZER_API",
    "model_not_found": "SENTINEL_ANALYZER_MODEL",
    "not_found_error": "SENTINEL_ANALYZER_MODEL",
}


class Analyzer(Protocol):
    """Anything that can assess transactions and axioms; raise ``AnalyzerError`` on
    failure and :class:`Busy` when at capacity."""

    def assess_transaction(self, txn: Transaction) -> Assessment: ...

    def assess_axiom(self, axiom: Axiom) -> Assessment: ...


class ModelApi(Protocol):
    """An analyzer API: ``kind`` names it to :func:`~workers.analyzer.answers.refusals.refusal`."""

    @property
    def kind(self) -> ApiKind: ...

    def endpoint(self, base_url: str) -> str:
        """The URL requests go to, given ``SENTINEL_ANALYZER_URL`` (its user-info removed)."""
        ...

    def auth_headers(self, url: str) -> dict[str, str]:
        """The headers that carry the API's key (and version) to ``url``."""
        ...

    def request(self, kind: str, payload: dict[str, Any], prompt: Prompt | None) -> bytes:
        """The body of one call about ``payload`` (a ``kind`` message), ``prompt`` its
        stream's (None where the API needs none). A model API raises
        :class:`~workers.analyzer.answers.replies.MessageRefused` for a body that cannot fit the
        model's context where it is known
        (:class:`~workers.analyzer.apis.context_window.ContextWindow`)."""
        ...

    def read(self, body: bytes, prompt: Prompt | None) -> Assessment:
        """The verdict in a 2xx reply; :class:`AnalyzerError` for anything else."""
        ...

    def misconfigured(self, status: int, body: bytes) -> AnalyzerError | None:
        """The error for a refusal of what this recipe sends (see :func:`refused_request`)
        or of this one message (:func:`~workers.analyzer.apis.context_window.context_error`), or
        None to let :func:`~workers.analyzer.answers.refusals.refusal` read the answer."""
        ...


def endpoint(base_url: str, path: str) -> str:
    """``path`` below ``base_url``'s path, its query kept (Azure's ``api-version``); a URL
    that already ends with ``path`` is taken as it is."""
    parts = urlsplit(base_url)
    base = parts.path.rstrip("/")
    if not base.endswith(path):
        base = f"{base}{path}"
    return urlunsplit((parts.scheme, parts.netloc, base, parts.query, ""))


def json_body(value: Any) -> bytes:
    """``value`` as JSON in UTF-8, non-ASCII text as itself rather than ``\\uXXXX`` escapes
    (an escape is several tokens where its character is one or less, so an escaped memo
    could fill a model's context its text fits). A lone surrogate (valid in JSON, not in
    UTF-8) makes the body go escaped, as JSON allows."""
    try:
        return json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value).encode()


def require_prompt(prompt: Prompt | None, kind: str) -> Prompt:
    if prompt is None:
        raise AnalyzerError(f"no prompt is declared for {kind} calls")
    return prompt


def verdict_from(
    data: str | dict[str, Any], prompt: Prompt, model: str, usage: Usage | None
) -> Assessment:
    """The verdict ``data`` (the model's JSON text, or a tool call's input) carries, valid
    against ``prompt.verdict``; :class:`AnalyzerError` naming the first problem otherwise.
    The message never quotes the reply (it is the model's, not ours to log)."""
    try:
        if isinstance(data, str):
            verdict: BaseModel = prompt.verdict.model_validate_json(data)
        else:
            verdict = prompt.verdict.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "reply"
        raise AnalyzerError(
            f"verdict does not match {prompt.schema_name}: {where}: {first['msg']}"
        ) from None
    fields = verdict.model_dump()
    return Assessment(
        is_threat=fields["is_threat"],
        risk_level=fields["risk_level"],
        narrative=str(fields["narrative"])[:NARRATIVE_MAX_CHARS],
        model=model,
        prompt_version=prompt.version,
        usage=usage,
    )


def count(value: Any) -> int | None:
    """A token count from a reply (a non-negative int), else None."""
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def refused_request(status: int, body: bytes) -> AnalyzerExhausted | None:
    """A refusal of the request itself (a parameter the server does not take, a model it
    does not serve): no retry and no rules fallback per message fixes a recipe, so it is
    *exhausted* (cause ``request_refused``: the fleet stops calling until an operator
    changes the setting it names and releases it), never "down". None for anything else.
    The model APIs read a refusal for one message's length first
    (:func:`~workers.analyzer.apis.context_window.context_error`): its words name
    ``max_tokens`` too, but it holds nobody but that message."""
    if status not in REFUSING_STATUSES:
        return None
    text = body[:4096].decode("utf-8", errors="replace").lower()
    for part, setting in REFUSED_PARTS.items():
        if part in text:
            return AnalyzerExhausted(
                f"the analyzer refused the request (HTTP {status}, about {part}): "
                f"check {setting} against this server's recipe in docs/analyzer.md",
                None,
                "request_refused",
            )
    return None


def model_refusal(
    status: int, body: bytes, max_tokens: int, window: ContextWindow
) -> AnalyzerError | None:
    """A model API's ``misconfigured``: a context refusal (the message's own, or the
    recipe's when ``max_tokens`` alone fills the context), else a refused recipe
    (:func:`refused_request`), else None."""
    return context_error(status, body, max_tokens, window) or refused_request(status, body)


def billed_verdict(
    body: bytes,
    prompt: Prompt | None,
    model: str,
    usage_of: Callable[[dict[str, Any]], Usage | None],
    verdict: Callable[[dict[str, Any], Prompt, str], Assessment],
) -> Assessment:
    """A model API's ``read``: ``verdict`` of the reply's JSON, naming the model the reply
    names (else ``model``); an answer without a verdict that reports ``usage`` (cut at
    ``max_tokens``, a refusal, content that does not validate) was billed all the same,
    and its error carries what (:func:`~workers.analyzer.answers.billed.billed`)."""
    reply = json_reply(body)
    named = reply.get("model")
    answered = named if isinstance(named, str) else model
    with billed(usage_of(reply), answered):
        return verdict(reply, require_prompt(prompt, "this"), answered)
