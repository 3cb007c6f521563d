"""A worker's analyzer series, one set per analyzer role, and what its shadow dropped.

A worker may ask up to three analyzers (``docs/analyzer.md``): the live one
(``primary``), a second model before the rules (``fallback``) and a model on trial
(``shadow``). Each is built from its own settings, with its own breaker, holds and
budget, so each has its own calls, breaker and exhaustion to watch: a fallback that
fails too, or a shadow whose quota is spent, must show apart from the live model. Every
analyzer series therefore carries a ``role`` label (:data:`ROLES`):

* ``analyzer_calls_total{role, outcome}`` (:data:`ANALYZER_OUTCOMES`),
  ``analyzer_circuit_changes_total{role, state}`` (:data:`CIRCUIT_STATES`);
* ``analyzer_circuit_state{role}``, ``analyzer_exhausted{role}`` (gauges);
* ``analyzer_tokens_total{role, model, kind}``
  (:class:`~sentinel_platform.streams.consumer.token_metrics.TokenCounter`).

The primary's series exist from the start (at 0, so a ``rate()`` never meets a missing
one, analyzer or not); a second role's appear when its analyzer is bound
(:meth:`AnalyzerMetrics.role`), so a worker without a fallback serves no fallback series.
``shadow_dropped_total{reason}`` (:data:`SHADOW_DROPS`) counts the shadow's jobs that
wrote no verdict, from the shadow's binding on.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from prometheus_client import CollectorRegistry, Counter, Gauge

from sentinel_platform.streams.consumer.token_metrics import TokenCounter

#: Who asked the analyzer: the live one, the fallback before the rules, the trial.
PRIMARY, FALLBACK, SHADOW = "primary", "fallback", "shadow"
ROLES = (PRIMARY, FALLBACK, SHADOW)
#: Outcomes of one analyzer call (``analyzer_calls_total{outcome=...}``).
ANALYZER_OUTCOMES = ("ok", "error", "timeout", "rejected_open", "busy", "exhausted")
CIRCUIT_STATES = ("open", "half_open", "closed")
#: Why a shadow job wrote no verdict: the queue full, waited past the shadow's timeout,
#: the shadow busy or failed (down, exhausted, wrong), its verdict not written to Redis.
SHADOW_DROPS = ("queue_full", "late", "busy", "failed", "write_failed")

CALLS_HELP = (
    "Analyzer calls by role (primary, fallback, shadow) and outcome: ok; error (refused, "
    "HTTP error, bad reply); timeout; rejected_open (not sent: the circuit breaker is "
    "open); busy (HTTP 429, 503 with Retry-After, the fleet's hold or rate limit, no free "
    "local connection: the message waits, never a failure); exhausted (a quota spent or a "
    "key rejected: the fleet stops calling that analyzer until the reset or a release)."
)
CHANGES_HELP = "Analyzer circuit breaker state changes, by role and the state entered."
STATE_HELP = (
    "Analyzer circuit breaker by role, as it is when scraped: 0 closed (calls go out, the "
    "first after a cool-down as the probe), 1 half-open (one probe call out), 2 open (calls "
    "fail at once)."
)
EXHAUSTED_HELP = (
    "1 while the role's analyzer said it is exhausted (a quota or spend limit spent, a key "
    "rejected) and the fleet holds its calls; 0 otherwise."
)
DROPPED_HELP = (
    "Shadow jobs that wrote no verdict, by reason: queue_full (the shadow's queue was "
    "full), late (waited past the shadow's call timeout), busy, failed (down, exhausted, "
    "a bad reply), write_failed (the verdict could not be written to Redis)."
)


class AnalyzerMeter:
    """The series of one analyzer role in one worker: what an analyzer reports to."""

    def __init__(
        self,
        calls: Mapping[str, Counter],
        changes: Mapping[str, Counter],
        state: Gauge,
        exhausted: Gauge,
        tokens: TokenCounter,
        role: str,
    ) -> None:
        self._calls, self._changes = calls, changes
        self._state, self._exhausted = state, exhausted
        self._tokens, self.role = tokens, role

    def count_call(self, outcome: str) -> None:
        """One call ended with ``outcome`` (:data:`ANALYZER_OUTCOMES`; another raises)."""
        self._calls[_known(outcome, self._calls)].inc()

    def count_circuit_change(self, state: str) -> None:
        """The breaker entered ``state`` (:data:`CIRCUIT_STATES`)."""
        self._changes[_known(state, self._changes)].inc()

    def circuit_state_from(self, read: Callable[[], float]) -> None:
        """The breaker gauge reads ``read()`` at every collection (thread-safe, quick)."""
        self._state.set_function(read)

    def set_exhausted(self, exhausted: bool) -> None:
        self._exhausted.set(1 if exhausted else 0)

    def count_tokens(
        self, model: str | None, input_tokens: int, output_tokens: int, cached: int | None
    ) -> None:
        """One answer's reported tokens (:meth:`TokenCounter.count`) under this role."""
        self._tokens.count(model, input_tokens, output_tokens, cached, role=self.role)


class AnalyzerMetrics:
    """The analyzer families of one worker's ``registry`` (its constant ``labels``), and
    the meter of each role, made once per role and shared by whoever asks for it."""

    def __init__(self, registry: CollectorRegistry, prefix: str, labels: Mapping[str, str]):
        self._registry, self._prefix = registry, prefix
        self._labels = dict(labels)
        names = tuple(self._labels)
        with_role = (*names, "role")
        self._calls = Counter(
            f"{prefix}_analyzer_calls", CALLS_HELP, (*with_role, "outcome"), registry=registry
        )
        self._changes = Counter(
            f"{prefix}_analyzer_circuit_changes",
            CHANGES_HELP,
            (*with_role, "state"),
            registry=registry,
        )
        self._state = Gauge(
            f"{prefix}_analyzer_circuit_state", STATE_HELP, with_role, registry=registry
        )
        self._exhausted = Gauge(
            f"{prefix}_analyzer_exhausted", EXHAUSTED_HELP, with_role, registry=registry
        )
        self._dropped = Counter(
            f"{prefix}_shadow_dropped", DROPPED_HELP, (*names, "reason"), registry=registry
        )
        #: the tokens the analyzers' model calls reported, by role and model
        self.tokens = TokenCounter(registry, prefix, self._labels)
        self._meters: dict[str, AnalyzerMeter] = {}
        self._drops: dict[str, Counter] = {}
        self._lock = threading.Lock()

    def role(self, role: str) -> AnalyzerMeter:
        """The meter of ``role`` (:data:`ROLES`; another raises), its series made at 0 the
        first time."""
        role = _known(role, ROLES)
        with self._lock:
            meter = self._meters.get(role)
            if meter is None:
                meter = self._meters[role] = self._meter(role)
            return meter

    def _meter(self, role: str) -> AnalyzerMeter:
        labels = {**self._labels, "role": role}
        calls = {o: self._calls.labels(**labels, outcome=o) for o in ANALYZER_OUTCOMES}
        changes = {s: self._changes.labels(**labels, state=s) for s in CIRCUIT_STATES}
        state, exhausted = self._state.labels(**labels), self._exhausted.labels(**labels)
        exhausted.set(0)
        return AnalyzerMeter(calls, changes, state, exhausted, self.tokens, role)

    def count_shadow_drop(self, reason: str) -> None:
        """One shadow job dropped for ``reason`` (:data:`SHADOW_DROPS`; another raises)."""
        self.shadow_drops()[_known(reason, SHADOW_DROPS)].inc()

    def shadow_drops(self) -> Mapping[str, Counter]:
        """The drop series by reason, made at 0 the first time (a shadow's binding)."""
        with self._lock:
            if not self._drops:
                for reason in SHADOW_DROPS:
                    self._drops[reason] = self._dropped.labels(**self._labels, reason=reason)
            return self._drops

    def roles(self) -> tuple[str, ...]:
        """The roles whose series exist, in :data:`ROLES` order."""
        with self._lock:
            return tuple(r for r in ROLES if r in self._meters)

    def snapshot(self) -> dict[str, float]:
        """Values by short name: the primary's as ``analyzer_calls_<outcome>``,
        ``analyzer_circuit_changes_<state>``, ``analyzer_circuit_state`` and
        ``analyzer_exhausted``; another role's the same with the role first
        (``fallback_analyzer_calls_ok``); the shadow's drops as ``shadow_dropped_<reason>``."""
        values: dict[str, float] = {}
        for role in self.roles():
            named = "" if role == PRIMARY else f"{role}_"
            labels = {**self._labels, "role": role}
            for outcome in ANALYZER_OUTCOMES:
                sample = self._value("analyzer_calls_total", {**labels, "outcome": outcome})
                values[f"{named}analyzer_calls_{outcome}"] = sample
            for state in CIRCUIT_STATES:
                sample = self._value("analyzer_circuit_changes_total", {**labels, "state": state})
                values[f"{named}analyzer_circuit_changes_{state}"] = sample
            values[f"{named}analyzer_circuit_state"] = self._value("analyzer_circuit_state", labels)
            values[f"{named}analyzer_exhausted"] = self._value("analyzer_exhausted", labels)
        for reason in self._drops:
            sample = self._value("shadow_dropped_total", {**self._labels, "reason": reason})
            values[f"shadow_dropped_{reason}"] = sample
        return values

    def _value(self, name: str, labels: Mapping[str, str]) -> float:
        return self._registry.get_sample_value(f"{self._prefix}_{name}", dict(labels)) or 0.0


def _known(value: str, known: Mapping[str, object] | tuple[str, ...]) -> str:
    if value not in known:
        raise KeyError(f"{value!r} is not one of {', '.join(known)}")
    return value
