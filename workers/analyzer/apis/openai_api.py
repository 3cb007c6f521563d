"""OpenAI's Chat Completions, as OpenAI, Azure OpenAI, Gemini, vLLM, Ollama, llama.cpp and
OpenRouter serve it.

The request: the stream's instructions as the system message, then the message as JSON
in the user message (the static part first, for the providers' prompt caches), the model,
``temperature`` 0 (the same message should get the same verdict) and ``max_tokens``
(``SENTINEL_ANALYZER_MAX_OUTPUT_TOKENS``). ``max_tokens`` rather than
``max_completion_tokens``: every server of the list reads it, while llama.cpp's and older
vLLM and Ollama releases ignore the newer name and would write without a bound. The
verdict's schema goes as ``response_format``: ``json_schema`` with ``strict: true``, or,
for servers that refuse that form (llama.cpp's Python server answers it with HTTP 500),
``{"type": "json_object", "schema": ...}`` (``SENTINEL_ANALYZER_RESPONSE_FORMAT``).

The key is sent as ``Authorization: Bearer``, or as ``api-key`` to Azure's hosts, which
expect that header. The reply's ``choices[0].message.content`` must be the verdict's
JSON; a refusal, an answer cut at ``max_tokens`` or one that does not validate is
"wrong", its ``usage`` counted all the same (it was billed). ``usage`` gives the tokens
(``prompt_tokens_details.cached_tokens`` the cached ones, where reported).

The body goes out as UTF-8 text, never ``\\uXXXX`` escapes; one that cannot fit the
model's context, where it is known, is not sent (:mod:`workers.analyzer.apis.context_window`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Literal
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

ResponseFormat = Literal["json_schema", "json_object"]
PATH = "/chat/completions"
#: Hosts of Azure OpenAI, which take the key as ``api-key`` rather than a bearer token.
AZURE_HOST_SUFFIXES = (
    ".openai.azure.com",
    ".cognitiveservices.azure.com",
    ".services.ai.azure.com",
)


@dataclass(frozen=True)
class OpenAiApi:
    """:class:`~workers.analyzer.apis.model_api.ModelApi` of Chat Completions."""

    model: str
    key: str = field(default="", repr=False)
    max_output_tokens: int = 400
    response_format: ResponseFormat = "json_schema"
    kind: ApiKind = "openai"
    #: The model's context where known: a body that cannot fit it is not sent.
    context: ContextWindow = field(default_factory=ContextWindow, compare=False, repr=False)

    def endpoint(self, base_url: str) -> str:
        return endpoint(base_url, PATH)

    def auth_headers(self, url: str) -> dict[str, str]:
        """The key's header for ``url`` (none without a key: local servers need none)."""
        if not self.key:
            return {}
        if (urlsplit(url).hostname or "").endswith(AZURE_HOST_SUFFIXES):
            return {"api-key": self.key}
        return {"Authorization": f"Bearer {self.key}"}

    def request(self, kind: str, payload: dict[str, Any], prompt: Prompt | None) -> bytes:
        body = self.body(kind, payload, prompt)
        self.context.check(body, self.max_output_tokens, partial(self.body, kind, {}, prompt))
        return body

    def body(self, kind: str, payload: dict[str, Any], prompt: Prompt | None) -> bytes:
        """The request about ``payload``, in UTF-8 (:func:`json_body`)."""
        prompt = require_prompt(prompt, kind)
        body = {
            "model": self.model,
            "messages": [
                {"role": "system", "content": prompt.instructions},
                {
                    "role": "user",
                    "content": json.dumps(payload, sort_keys=True, ensure_ascii=False),
                },
            ],
            "temperature": 0,
            "max_tokens": self.max_output_tokens,
            "response_format": self.format_of(prompt),
        }
        return json_body(body)

    def format_of(self, prompt: Prompt) -> dict[str, Any]:
        if self.response_format == "json_object":
            return {"type": "json_object", "schema": prompt.schema}
        return {
            "type": "json_schema",
            "json_schema": {"name": prompt.schema_name, "strict": True, "schema": prompt.schema},
        }

    def misconfigured(self, status: int, body: bytes) -> AnalyzerError | None:
        return model_refusal(status, body, self.max_output_tokens, self.context)

    def read(self, body: bytes, prompt: Prompt | None) -> Assessment:
        """The verdict (:func:`~workers.analyzer.apis.model_api.billed_verdict`)."""
        return billed_verdict(body, prompt, self.model, usage_of, self._verdict)

    def _verdict(self, reply: dict[str, Any], prompt: Prompt, model: str) -> Assessment:
        choices = reply.get("choices")
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], dict):
            raise AnalyzerError("reply has no choices")
        choice = choices[0]
        message = choice.get("message")
        if not isinstance(message, dict):
            raise AnalyzerError("reply's choice has no message")
        if message.get("refusal"):
            raise AnalyzerError("the model refused to give a verdict")
        if choice.get("finish_reason") == "length":
            raise AnalyzerError("verdict cut at SENTINEL_ANALYZER_MAX_OUTPUT_TOKENS")
        content = message.get("content")
        if not isinstance(content, str):
            raise AnalyzerError("reply's message has no text content")
        return verdict_from(content, prompt, model, usage_of(reply))


def usage_of(reply: dict[str, Any]) -> Usage | None:
    """``usage`` of a Chat Completions reply, or None when absent or malformed."""
    usage = reply.get("usage")
    if not isinstance(usage, dict):
        return None
    prompt, completion = count(usage.get("prompt_tokens")), count(usage.get("completion_tokens"))
    if prompt is None or completion is None:
        return None
    details = usage.get("prompt_tokens_details")
    cached = count(details.get("cached_tokens")) if isinstance(details, dict) else None
    return Usage(prompt, completion, cached)
