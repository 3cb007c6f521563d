"""What every domain processor shares: its stream's wire model, the analyzer, the binds.

A processor is declared by its stream: :class:`WireProcessor` takes the wire model from
the stream's registry entry (``StreamSpec.wire_model``), so parsing and the natural key
are the wire model's own (``from_fields``, ``natural_key``) and are written once, not per
stream. A subclass names its stream and writes :meth:`WireProcessor.process`, the only
thing that is truly per stream (the rules, the audit, the result fields).

The analyzer is optional. With one, the processor's calls are paid for
(``paid_calls``: copies of a key on other workers wait for this worker's claim instead
of calling again), and the worker hands it its metrics and its Redis client once, before
the first message (``bind_metrics``, ``bind_redis``: the analyzer's calls and circuit in
the worker's metrics, its ``Retry-After`` hold and rate limit shared with the fleet), its
stop (``bind_stop``: a wait for a rate slot ends with it) and its log fields
(``bind_log_fields``: the worker's stream, group and consumer on the analyzer's lines).

A rules fallback says why (:meth:`WireProcessor.fallback_of`,
:mod:`workers.processors.provisional`): provisional, and queued for re-screening unless
``SENTINEL_ANALYZER_RESCREEN`` is off, when the analyzer could not be asked. Called with
``model_only`` (re-screening), a processor makes no rules verdict: the failure is raised.

The demo's entries (marked, :func:`~sentinel_platform.schemas.is_demo`) never reach the
analyzer: the demo runs by itself, so it must never spend a paid call nobody asked for.
They are decided by the rules (``driver_used=rules``) and their results carry the same
mark, so that the reports can leave them out of a user's figures.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any, ClassVar, Generic, TypeVar, cast

from sentinel_platform.registry import WireModel, spec_for
from sentinel_platform.schemas import DEMO_FIELD, DEMO_VALUE
from sentinel_platform.settings import Settings
from sentinel_platform.streams.consumer.metrics import Metrics
from sentinel_platform.streams.consumer.processor import Effect
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import keys_for
from workers.analyzer import Analyzer, StreamPrompt
from workers.analyzer.lanes.configured import lanes_from_settings
from workers.processors.provisional import (
    Fallback,
    fallback,
    fallback_cause,
    model_only_error,
    primary_unavailable,
)

M = TypeVar("M", bound=WireModel)


def is_latency_sample(driver: str, with_analyzer: bool) -> bool:
    """Whether a verdict decided by ``driver`` timed the processor's downstream
    (``Effect.sample``). With an analyzer only its answers do: a fallback (it was down,
    or its breaker open) or a verdict of the rules alone (an axiom below the audit
    threshold) is over in a millisecond and says nothing of the analyzer, and the
    in-flight limit, fed those, reads the analyzer's real latency as a queue. Without
    one every verdict is the rules', and their own time is what the limit measures."""
    return driver == "analyzer" or not with_analyzer


class WireProcessor(Generic[M]):
    """A processor of the stream named :attr:`stream` (a registry name).

    Subclasses set :attr:`stream` (and :attr:`name`, its name in logs and metrics) and
    implement :meth:`process`; everything else follows from the stream's declaration.
    """

    #: the registry name of the stream this processor consumes
    stream: ClassVar[str]
    #: short name in logs and metrics ("transactions", "axioms")
    name: ClassVar[str]

    def __init__(self, settings: Settings, analyzer: Analyzer | None = None) -> None:
        self.settings = settings
        self.analyzer = analyzer
        self.wire_model: type[WireModel] = spec_for(self.stream).wire_model
        bind_keys = getattr(analyzer, "bind_keys", None)  # a shadow writes beside the results
        if bind_keys is not None:
            bind_keys(keys_for(settings, self.stream))
        #: an analyzer call is paid for: copies of a key on other workers wait for its
        #: claim instead of calling again (``Claims``)
        self.paid_calls = analyzer is not None

    def bind_metrics(self, metrics: Metrics) -> None:
        """Count the analyzer's calls and circuit changes in the worker's metrics (the
        worker calls this once its metrics exist; without an analyzer there is nothing)."""
        bind = getattr(self.analyzer, "bind_metrics", None)
        if bind is not None:
            bind(metrics)

    def bind_log_fields(self, fields: Mapping[str, Any]) -> None:
        """Put the worker's stream, group and consumer on the analyzer's lines (the worker
        calls this once, at start-up; without an analyzer there is nothing)."""
        bind = getattr(self.analyzer, "bind_log_fields", None)
        if bind is not None:
            bind(fields)

    def bind_redis(self, client: RedisClient) -> None:
        """Share the analyzer's ``Retry-After`` hold and rate limit with the fleet through
        the worker's Redis client (the worker calls this once, before the first message)."""
        bind = getattr(self.analyzer, "bind_redis", None)
        if bind is not None:
            bind(client)

    def is_sample(self, driver: str) -> bool:
        """:func:`is_latency_sample` for this processor's analyzer (or its absence)."""
        return is_latency_sample(driver, self.analyzer is not None)

    def bind_stop(self, stop: threading.Event) -> None:
        """End the analyzer's waits for a rate slot on the worker's stop (the worker calls
        this once, at start-up): a stopping worker sends no more calls."""
        bind = getattr(self.analyzer, "bind_stop", None)
        if bind is not None:
            bind(stop)

    def parse(self, fields: Mapping[str, str]) -> M:
        """The entry as the stream's wire model reads it (``SchemaError`` naming the bad
        field otherwise)."""
        return cast(M, self.wire_model.from_fields(fields))

    def natural_key(self, message: M) -> str:
        """The wire model's natural key (a transaction's id, an axiom's source and time)."""
        return message.natural_key

    def analyzer_for(self, message: M) -> Analyzer | None:
        """The analyzer to ask about ``message``: none for a demo entry (rules only)."""
        return None if _is_demo(message) else self.analyzer

    def marked(self, message: M, fields: dict[str, Any]) -> dict[str, Any]:
        """``fields`` (a result or log fields) with the demo's mark when ``message`` has it."""
        return {**fields, DEMO_FIELD: DEMO_VALUE} if _is_demo(message) else fields

    def fallback_of(self, message: M, exc: BaseException, day: str, model_only: bool) -> Fallback:
        """The rules fallback for ``message`` after the analyzer raised ``exc``: why, and
        its re-screen queue entry when the cause is the analyzer's and re-screening is on.
        ``model_only`` (a re-screen): no fallback, the error the message meets instead
        (:func:`~workers.processors.provisional.model_only_error`) is raised."""
        cause = fallback_cause(exc)
        if model_only:
            raise model_only_error(cause, exc) from exc
        wire = message.to_fields() if self.settings.analyzer_rescreen else None
        return fallback(cause, day, wire)

    def process(self, message: M, model_only: bool = False) -> Effect:
        raise NotImplementedError


def analyzer_of(settings: Settings, prompt: StreamPrompt) -> Analyzer | None:
    """The analyzer a processor of ``prompt``'s stream asks, its lanes included (a
    fallback model asked when the live one could not be, :func:`primary_unavailable`),
    or None for rules only."""
    return lanes_from_settings(settings, prompt, falls_through=primary_unavailable)


def _is_demo(message: object) -> bool:
    # A plug-in stream's wire model may not know the mark: then nothing is demo.
    return bool(getattr(message, "demo", False))
