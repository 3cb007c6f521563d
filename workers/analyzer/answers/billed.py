"""Billed means counted: the tokens of a 2xx answer that gave no verdict.

A model API bills every answer it produced, whatever the client makes of it: an answer
cut at ``max_tokens`` (OpenAI's ``finish_reason: "length"``, Anthropic's ``stop_reason:
"max_tokens"``), a refusal (``message.refusal``), or content that is not the verdict all
carry ``usage`` and cost what it says. Such an answer is still *wrong* (the rules decide,
the breaker counts it), but it is raised as :class:`UnusableAnswer`, which carries its
``usage`` and ``model``, so the client settles the token budget and counts the tokens
(the daily counter, ``analyzer_tokens``) and the processor's fallback entry records them
(:func:`billed_fields`) where the cost figures read them. Without this the counters,
and with them the daily budget, saw only the answers that validated.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from workers.analyzer.answers.replies import AnalyzerError, Usage

__all__ = ["UnusableAnswer", "billed", "billed_fields"]


class UnusableAnswer(AnalyzerError):
    """A 2xx answer the API billed (``usage``) that carries no usable verdict. *Wrong*
    like any :class:`AnalyzerError`; ``usage`` and ``model`` (the one that answered, or
    the configured one) say what it cost."""

    def __init__(self, message: str, usage: Usage, model: str | None) -> None:
        super().__init__(message)
        self.usage = usage
        self.model = model

    def __reduce__(self) -> Any:
        return (type(self), (str(self), self.usage, self.model))


@contextmanager
def billed(usage: Usage | None, model: str | None) -> Iterator[None]:
    """Read a reply's verdict inside this block: an :class:`AnalyzerError` raised in it
    leaves as :class:`UnusableAnswer` carrying ``usage`` and ``model``, so what was billed
    is not lost with the verdict. Only a plain (*wrong*) error is replaced: one that
    means more (exhausted, down, or already :class:`UnusableAnswer`) keeps its meaning,
    and nothing changes when the reply reports no ``usage`` (nothing known to count)."""
    try:
        yield
    except AnalyzerError as exc:
        if usage is None or type(exc) is not AnalyzerError:
            raise
        raise UnusableAnswer(str(exc), usage, model) from None


def billed_fields(exc: BaseException) -> dict[str, str]:
    """The fields a fallback result entry records for a failed analyzer call: the model
    and the tokens it was billed (as a verdict's ``Assessment.recorded`` names them), so
    the cost figures count them; empty when the failure billed nothing known."""
    if not isinstance(exc, UnusableAnswer):
        return {}
    fields = {} if exc.model is None else {"model": exc.model}
    return {**fields, **exc.usage.recorded()}
