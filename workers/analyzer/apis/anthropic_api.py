"""Anthropic's Messages API, the verdict obtained as a forced tool call.

Anthropic's own structured output is a tool: the verdict's schema is the ``input_schema``
of one tool, ``record_<kind>_verdict``, and ``tool_choice`` forces the model to call it,
so the answer's ``tool_use`` block's ``input`` is the verdict (its OpenAI-compatible layer
ignores ``response_format``, hence this module). The request carries the tool and the
stream's instructions (``system``, marked ``cache_control`` so a long prompt is cached)
before the message, ``temperature`` 0 and ``max_tokens``
(``SENTINEL_ANALYZER_MAX_OUTPUT_TOKENS``; Anthropic requires it). The key goes as
``x-api-key`` with ``anthropic-version: 2023-06-01``.

``usage.input_tokens`` counts only the prompt tokens after the last cache breakpoint; the
verdict records the whole prompt (plus ``cache_creation_input_tokens`` and
``cache_read_input_tokens``) as ``input_tokens``, and the cache reads as
``cached_input_tokens``, so the figures compare with OpenAI's.

The body goes out as UTF-8 text, never ``\\uXXXX`` escapes; one that cannot fit the
model's context, where it is known, is not sent (:mod:`workers.analyzer.apis.context_window`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import partial
from typing import Any
from urllib.parse import urlsplit

from workers.analyzer.answers.refusals import ApiKind
from workers.analyzer.answers.replies import AnalyzerError, Assessment, Usage
from workers.analyzer.apis.context_window import ContextWindow
from workers.analyzer.apis.model_api import (
    billed_verdict,
    count,
    endpoint,
    json_body,
    model_refusal,
    require_prompt,
    verdict_from,
)
from workers.analyzer.prompts import Prompt

VERSION = "2023-06-01"


@dataclass(frozen=True)
class AnthropicApi:
    """:class:`~workers.analyzer.apis.model_api.ModelApi` of the Messages API."""

    model: str
    key: str = field(default="", repr=False)
    max_output_tokens: int = 400
    kind: ApiKind = "anthropic"
    #: The model's context where known: a body that cannot fit it is not sent.
    context: ContextWindow = field(default_factory=ContextWindow, compare=False, repr=False)

    def endpoint(self, base_url: str) -> str:
        """``/v1/messages`` below the base URL (``https://api.anthropic.com``), or
        ``/messages`` below one that already ends in ``/v1``."""
        path = urlsplit(base_url).path.rstrip("/")
        return endpoint(base_url, "/messages" if path.endswith("/v1") else "/v1/messages")

    def auth_headers(self, url: str) -> dict[str, str]:
        headers = {"anthropic-version": VERSION}
        if self.key:
            headers["x-api-key"] = self.key
        return headers

    def request(self, kind: str, payload: dict[str, Any], prompt: Prompt | None) -> bytes:
        body = self.body(kind, payload, prompt)
        self.context.check(body, self.max_output_tokens, partial(self.body, kind, {}, prompt))
        return body

    def body(self, kind: str, payload: dict[str, Any], prompt: Prompt | None) -> bytes:
        """The request about ``payload``, in UTF-8 (:func:`json_body`)."""
        prompt = require_prompt(prompt, kind)
        tool = tool_name(prompt)
        body = {
            "model": self.model,
            "max_tokens": self.max_output_tokens,
            "temperature": 0,
            "tools": [
                {
                    "name": tool,
                    "description": f"Record the {prompt.kind}'s verdict.",
                    "input_schema": prompt.schema,
                }
            ],
            "tool_choice": {"type": "tool", "name": tool},
            "system": [
                {
                    "type": "text",
                    "text": prompt.instructions,
                    "cache_control": {"type": "ephemeral"},
                }
            ],
            "messages": [
                {"role": "user", "content": json.dumps(payload, sort_keys=True, ensure_ascii=False)}
            ],
        }
        return json_body(body)

    def misconfigured(self, status: int, body: bytes) -> AnalyzerError | None:
        return model_refusal(status, body, self.max_output_tokens, self.context)

    def read(self, body: bytes, prompt: Prompt | None) -> Assessment:
        """The verdict (:func:`~workers.analyzer.apis.model_api.billed_verdict`)."""
        return billed_verdict(body, prompt, self.model, usage_of, self._verdict)

    def _verdict(self, reply: dict[str, Any], prompt: Prompt, model: str) -> Assessment:
        if reply.get("stop_reason") == "max_tokens":
            raise AnalyzerError("verdict cut at SENTINEL_ANALYZER_MAX_OUTPUT_TOKENS")
        content = reply.get("content")
        blocks = content if isinstance(content, list) else []
        calls = [
            block
            for block in blocks
            if isinstance(block, dict)
            and block.get("type") == "tool_use"
            and block.get("name") == tool_name(prompt)
        ]
        if not calls or not isinstance(calls[0].get("input"), dict):
            raise AnalyzerError(f"reply has no {tool_name(prompt)} tool call")
        return verdict_from(calls[0]["input"], prompt, model, usage_of(reply))


def tool_name(prompt: Prompt) -> str:
    return f"record_{prompt.schema_name}"


def usage_of(reply: dict[str, Any]) -> Usage | None:
    """``usage`` of a Messages reply, the whole prompt as ``input_tokens``, or None."""
    usage = reply.get("usage")
    if not isinstance(usage, dict):
        return None
    fresh, output = count(usage.get("input_tokens")), count(usage.get("output_tokens"))
    if fresh is None or output is None:
        return None
    written = count(usage.get("cache_creation_input_tokens")) or 0
    read = count(usage.get("cache_read_input_tokens"))
    return Usage(fresh + written + (read or 0), output, read)
