"""A message too long for the model's context: that message's refusal, not the fleet's.

Every model server refuses a request whose prompt and ``max_tokens`` together exceed the
model's context, each in its own documented words (:func:`context_refusal` reads them
all). Such a refusal is about one message: the next, shorter one is answered. So it is
:class:`~workers.analyzer.answers.replies.MessageRefused` (the breaker does not count it, the
fleet is not held, ``SENTINEL_ANALYZER_WHEN_DOWN`` decides the message), unless the
recipe's own ``max_tokens`` fills the whole context, which no message can change: then
it is the refused recipe it looks like (:func:`context_error`).

The refusals announce the context's size; :class:`ContextWindow` remembers it (or takes
``SENTINEL_ANALYZER_CONTEXT_TOKENS``), so a later message that cannot fit is refused
before it is sent (:meth:`ContextWindow.check`). That check counts tokens from the
body's UTF-8 bytes with a *lower* bound (:data:`BYTES_PER_TOKEN_AT_MOST`): a message is
refused unsent only when even the fewest tokens its bytes could be do not fit. A message
the estimate lets through and the server refuses costs one call and ends the same way.
"""

from __future__ import annotations

import json
import math
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from workers.analyzer.answers.refusals import ErrorBody, describe_error
from workers.analyzer.answers.replies import AnalyzerError, AnalyzerExhausted, MessageRefused

#: Statuses a context refusal comes with: 400 everywhere; llama-cpp-python's server
#: answers 500 with its engine's own words when it cannot read the request back.
CONTEXT_STATUSES = frozenset({400, 500})
#: No common tokenizer packs text (English, JSON, Cyrillic, CJK) into fewer tokens than
#: one per this many UTF-8 bytes on average (English and JSON run at about 4, Cyrillic at
#: 5-8 on the newest vocabularies, CJK at about 3): the pre-send check's lower bound.
BYTES_PER_TOKEN_AT_MOST = 8
#: The words of each documented refusal; the first group, where there is one, the
#: context's size in tokens.
_REFUSALS = (
    # OpenAI, vLLM, llama-cpp-python: "This model's maximum context length is N tokens."
    re.compile(r"maximum context length is (\d+) tokens", re.IGNORECASE),
    # Anthropic: "prompt is too long: 210000 tokens > 200000 maximum"
    re.compile(r"prompt is too long: \d+ tokens > (\d+) maximum", re.IGNORECASE),
    # Anthropic: "input length and `max_tokens` exceed context limit: 197626 + 4096 > 200000"
    re.compile(r"input length and `max_tokens` exceed context limit: \d+ \+ \d+ > (\d+)"),
    # llama-cpp-python's engine: "Requested tokens (N) exceed context window of M"
    re.compile(r"Requested tokens \(\d+\) exceed context window of (\d+)"),
    # llama.cpp's server: "request (N tokens) exceeds the available context size (M tokens)"
    re.compile(r"exceeds the available context size(?: \((\d+) tokens\))?", re.IGNORECASE),
    # vLLM: "'max_tokens' or 'max_completion_tokens' is too large: ..." (its "maximum
    # context length is N tokens" further on gives the size, read by the first pattern)
    re.compile(r"'max_tokens' or 'max_completion_tokens' is too large"),
)
#: Error codes and types that say "context" whatever the message.
_CONTEXT_KINDS = frozenset({"context_length_exceeded", "exceed_context_size_error"})


@dataclass(frozen=True)
class ContextRefusal:
    """A refusal for a request longer than the model's context: the provider's error
    (type, code, message) and the context's size in tokens where the answer says it."""

    error: ErrorBody
    context_tokens: int | None


def context_refusal(status: int, body: bytes) -> ContextRefusal | None:
    """The context refusal ``body`` is, in any documented dialect: OpenAI's and
    llama-cpp-python's ``{"error": {"code": "context_length_exceeded", ...}}``, vLLM's
    ``{"object": "error", "message": ...}`` and ``{"error": {...}}``, Anthropic's
    ``{"type": "error", "error": {"type": "invalid_request_error", ...}}`` and llama.cpp's
    ``{"error": {"type": "exceed_context_size_error", "n_ctx": ...}}``. None for any other
    answer (a refused parameter, a quota, ...)."""
    if status not in CONTEXT_STATUSES:
        return None
    fields = _error_fields(body)
    if fields is None:
        return None
    error = ErrorBody(
        type=_text(fields.get("type")),
        code=_text(fields.get("code")),
        message=_text(fields.get("message")),
    )
    size = _count(fields.get("n_ctx"))
    known = bool(_CONTEXT_KINDS & {error.type, error.code})
    for words in _REFUSALS:
        found = words.search(error.message)
        if found is None:
            continue
        known = True
        if size is None and found.groups() and found[1]:
            size = int(found[1])
    return ContextRefusal(error, size) if known else None


def context_error(
    status: int, body: bytes, max_tokens: int, window: ContextWindow
) -> AnalyzerError | None:
    """What a context refusal means (None for any other answer): the message's own
    :class:`MessageRefused`, or, when the recipe's ``max_tokens`` alone fills the context
    it announces, the refused recipe (:class:`AnalyzerExhausted`, ``request_refused``).
    The announced size is remembered in ``window`` for the checks before sending."""
    refused = context_refusal(status, body)
    if refused is None:
        return None
    said = describe_error(status, refused.error)
    size = refused.context_tokens
    if size is not None:
        window.learn(size)
        if max_tokens >= size:
            return recipe_refused(said, max_tokens, size)
    return MessageRefused(f"{said} (the message does not fit the model's context)")


def recipe_refused(said: str, max_tokens: int, size: int) -> AnalyzerExhausted:
    """A recipe no message fits: what it asks the model to write leaves no room."""
    return AnalyzerExhausted(
        f"{said}: SENTINEL_ANALYZER_MAX_OUTPUT_TOKENS ({max_tokens}) leaves no room for a "
        f"message in the model's context of {size} tokens",
        None,
        "request_refused",
    )


def fewest_tokens(body_bytes: int) -> int:
    """The fewest tokens a body of ``body_bytes`` UTF-8 bytes could be (a lower bound)."""
    return math.ceil(max(0, body_bytes) / BYTES_PER_TOKEN_AT_MOST)


def fits(body_bytes: int, max_tokens: int, context_tokens: int) -> bool:
    """Whether a body of ``body_bytes`` may fit a context of ``context_tokens`` beside its
    ``max_tokens``, counting the body at its fewest tokens: False only when it cannot."""
    return fewest_tokens(body_bytes) + max(0, max_tokens) <= context_tokens


class ContextWindow:
    """The model's context in tokens, where known: the smallest of ``configured``
    (``SENTINEL_ANALYZER_CONTEXT_TOKENS``) and what refusals announced since
    (:meth:`learn`), so a setting above the server's real context is corrected by its
    first refusal. One per worker, shared by its threads; what it learns lasts the
    worker's life (a model's context is fixed while it is served)."""

    def __init__(self, configured: int | None = None) -> None:
        if configured is not None and configured < 1:
            raise ValueError(f"the context must be at least 1 token, got {configured}")
        self._tokens = configured
        self._lock = threading.Lock()

    @property
    def tokens(self) -> int | None:
        with self._lock:
            return self._tokens

    def learn(self, tokens: int) -> None:
        """Remember a context size a refusal announced (the smaller of the two wins)."""
        if tokens < 1:
            return
        with self._lock:
            self._tokens = tokens if self._tokens is None else min(self._tokens, tokens)

    def check(self, body: bytes, max_tokens: int, bare: Callable[[], bytes]) -> None:
        """Refuse, before it is sent, a body that cannot fit the known context:
        :class:`MessageRefused`, or, when even ``bare()`` (the same request about an empty
        message) cannot fit, the refused recipe. Nothing when the context is unknown."""
        size = self.tokens
        if size is None or fits(len(body), max_tokens, size):
            return
        said = (
            f"not sent: the request is at least {fewest_tokens(len(body))} tokens and "
            f"max_tokens {max_tokens}, past the model's context of {size} tokens"
        )
        if not fits(len(bare()), max_tokens, size):
            raise recipe_refused(said, max_tokens, size)
        raise MessageRefused(f"{said} (the message does not fit the model's context)", sent=False)


def _error_fields(body: bytes) -> dict[str, Any] | None:
    """The object holding an error's fields: ``error`` when it is one, else the body
    itself for vLLM's older top-level ``{"object": "error", "message": ...}``; a plain
    text body (llama-cpp-python's engine words) as its message."""
    try:
        parsed: Any = json.loads(body) if body.strip() else None
    except (UnicodeDecodeError, ValueError):
        return {"message": body[:4096].decode("utf-8", errors="replace")}
    if not isinstance(parsed, dict):
        return None
    error = parsed.get("error")
    if isinstance(error, dict):
        return error
    if isinstance(error, str):
        return {"message": error}
    return parsed if parsed.get("object") == "error" else None


def _text(value: object) -> str:
    return value if isinstance(value, str) else "" if value is None else str(value)


def _count(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value > 0:
        return value
    return None
