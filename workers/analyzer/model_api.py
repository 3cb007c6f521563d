"""One small protocol per analyzer API: build the request, read the reply into a verdict.

:class:`~workers.analyzer.client.HttpAnalyzer` is the transport (its connection semaphore,
whole-call deadline, 64 KiB reply cap, breaker and fleet limits); what differs between
APIs is only the request's path, headers and body and how a 2xx reply becomes an
:class:`~workers.analyzer.replies.Assessment`. Each API is one module
(:mod:`~workers.analyzer.sentinel_api`, :mod:`~workers.analyzer.openai_api`,
:mod:`~workers.analyzer.anthropic_api`) implementing :class:`ModelApi`; the refusals
(non-2xx) of every API are read by :func:`workers.analyzer.answers.refusal`.

The helpers here are what the model APIs share: the endpoint below a base URL, the
validation of a verdict against its prompt's model (a reply that does not validate is
"wrong": :class:`~workers.analyzer.replies.AnalyzerError`) and reading a JSON reply.
"""

from __future__ import annotations

import json
from typing import Any, Protocol
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ValidationError

from workers.analyzer.answers import ApiKind
from workers.analyzer.prompts import Prompt
from workers.analyzer.replies import NARRATIVE_MAX_CHARS, AnalyzerError, Assessment, Usage

__all__ = ["ApiKind", "ModelApi", "endpoint", "json_reply", "verdict_from"]


class ModelApi(Protocol):
    """An analyzer API: ``kind`` names it to :func:`~workers.analyzer.answers.refusal`."""

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
        stream's (None where the API needs none)."""
        ...

    def read(self, body: bytes, prompt: Prompt | None) -> Assessment:
        """The verdict in a 2xx reply; :class:`AnalyzerError` for anything else."""
        ...


def endpoint(base_url: str, path: str) -> str:
    """``path`` below ``base_url``'s path, its query kept (Azure's ``api-version``); a URL
    that already ends with ``path`` is taken as it is."""
    parts = urlsplit(base_url)
    base = parts.path.rstrip("/")
    if not base.endswith(path):
        base = f"{base}{path}"
    return urlunsplit((parts.scheme, parts.netloc, base, parts.query, ""))


def json_reply(body: bytes) -> dict[str, Any]:
    """A reply's JSON object, or :class:`AnalyzerError`."""
    try:
        reply = json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise AnalyzerError(f"reply is not JSON ({exc})") from None
    if not isinstance(reply, dict):
        raise AnalyzerError("reply is not a JSON object")
    return reply


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
