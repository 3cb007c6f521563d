"""A second model before the rules: :class:`FallbackAnalyzer`.

The first analyzer decides whenever it can. When it cannot be asked at all (the
provider's quota exhausted, the fleet held until released, the service down, its breaker
open: the causes a rules verdict would call provisional), the message goes to the
second analyzer, and only when that fails too do the rules decide, as they would
without it. A busy first analyzer (:class:`Busy`: a ``Retry-After``, no free connection)
is not a failure: the message waits for it, as it does with one analyzer, so a burst of
429s never moves traffic to the second model. A failure of the message's own (the model
refused it, billed an answer with no verdict) is not the first analyzer's absence either:
it goes up as it is.

The verdict says which analyzer decided (``Assessment.role``, recorded as
``analyzer_role``); a verdict of the second model is a model verdict, not provisional.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from sentinel_platform.schemas import Axiom, Transaction
from sentinel_platform.streams.consumer.metrics import Metrics
from sentinel_platform.streams.consumer.processor import Busy
from workers.analyzer.answers.replies import Assessment
from workers.analyzer.apis.model_api import Analyzer

T = TypeVar("T")

#: ``Assessment.role`` of each analyzer of a :class:`FallbackAnalyzer`
PRIMARY, FALLBACK = "primary", "fallback"


class FallbackAnalyzer:
    """``primary``, and ``fallback`` when ``falls_through(exc)`` says the primary's
    failure ``exc`` means it could not be asked. Both failing, the primary's error is
    raised (its cause is the message's fallback cause: the primary is the one the
    re-screen waits for); the fallback's :class:`Busy` is raised as it is (the message
    waits for the model that would decide it)."""

    def __init__(
        self,
        primary: Analyzer,
        fallback: Analyzer,
        falls_through: Callable[[BaseException], bool],
    ) -> None:
        self.primary = primary
        self.fallback = fallback
        self.falls_through = falls_through

    def __repr__(self) -> str:
        return f"FallbackAnalyzer({self.primary!r}, fallback={self.fallback!r})"

    def deciders(self) -> tuple[Analyzer, ...]:
        """The analyzers that may decide through this one: both (a gate waiting for an
        analyzer that may be asked waits for either)."""
        return (self.primary, self.fallback)

    def assess_transaction(self, txn: Transaction) -> Assessment:
        return self._ask(lambda a: a.assess_transaction(txn))

    def assess_axiom(self, axiom: Axiom) -> Assessment:
        return self._ask(lambda a: a.assess_axiom(axiom))

    def _ask(self, ask: Callable[[Analyzer], Assessment]) -> Assessment:
        try:
            return ask(self.primary)
        except Busy:
            raise
        except Exception as exc:
            if not self.falls_through(exc):
                raise
            first = exc
        try:
            verdict = ask(self.fallback)
        except Busy:
            raise
        except Exception:
            raise first from None
        return dataclasses.replace(verdict, role=FALLBACK)

    # --- the worker's binds, handed to both (metrics under each one's role) --------------

    def bind_log_fields(self, fields: Mapping[str, Any]) -> None:
        bind_if_any(self.primary, "bind_log_fields", fields)
        bind_if_any(self.fallback, "bind_log_fields", {**fields, "analyzer_role": FALLBACK})

    def bind_metrics(self, metrics: Metrics, role: str = PRIMARY) -> None:
        """The primary counts under ``role``, the fallback under ``fallback``: an operator
        tells a failing fallback from a failing primary."""
        bind_if_any(self.primary, "bind_metrics", metrics, role)
        bind_if_any(self.fallback, "bind_metrics", metrics, FALLBACK)

    def bind_redis(self, client: Any) -> None:
        for analyzer in (self.primary, self.fallback):
            bind_if_any(analyzer, "bind_redis", client)

    def bind_stop(self, stop: threading.Event) -> None:
        for analyzer in (self.primary, self.fallback):
            bind_if_any(analyzer, "bind_stop", stop)

    def close(self) -> None:
        for analyzer in (self.primary, self.fallback):
            bind_if_any(analyzer, "close")


def bind_if_any(analyzer: object, name: str, *args: Any) -> None:
    """Call ``analyzer.name(*args)`` when it has it (a plain analyzer has no binds)."""
    method = getattr(analyzer, name, None)
    if method is not None:
        method(*args)
