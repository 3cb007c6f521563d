"""The analyzer's HTTP client: one call, its deadline, its connections, its outcome.

An analyzer (an HTTP service, in the original a hosted model) may know better than the
rules but can be slow, down, busy or wrong. What the caller gets for each
(:mod:`workers.analyzer.answers.replies`):

* **busy** (429, 503 with ``Retry-After``, the fleet's hold or rate limit, no local
  connection in time): :class:`~sentinel_platform.streams.consumer.processor.Busy`. The
  message waits for the analyzer; it never gets a rules verdict for the analyzer being
  busy, and the circuit breaker does not count it. An answer with no wait holds the
  fleet for a backoff, and one that answers nothing but busy past a bound is down
  (:mod:`workers.analyzer.answers.busy_spell`).
* **down** (refused, timed out, 5xx without ``Retry-After``): :class:`AnalyzerDown`, so
  the rules decide (``SENTINEL_ANALYZER_WHEN_DOWN=rules``), or :class:`Busy`
  (``wait``). A circuit breaker (:mod:`workers.analyzer.breaker`) stops asking an
  analyzer that keeps failing, so its outage costs each message milliseconds instead of
  the timeout.
* **wrong** (4xx, a reply outside the contract): :class:`AnalyzerError`, the rules decide.
* **exhausted** (a quota or spend limit spent, a key rejected:
  :func:`workers.analyzer.answers.refusals.refusal`): :class:`AnalyzerExhausted`. The whole fleet
  stops calling at once (the fleet hold, until the answer's reset or a release; a
  rejected key holds only the workers on that key: :mod:`workers.analyzer.keys.key_source`),
  the breaker does not count it, and the messages follow ``SENTINEL_ANALYZER_WHEN_DOWN``.

The HTTP client keeps its connections alive across messages and validates the reply
strictly, because a half-understood answer is worse than none (``docs/analyzer.md``).
What is sent and how a reply reads are the API module's
(:class:`~workers.analyzer.apis.model_api.ModelApi`); everything above is the client's, the
same for every API.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from sentinel_platform.schemas import Axiom, Transaction
from sentinel_platform.settings import redact_url, url_problem
from sentinel_platform.shown import shown
from sentinel_platform.streams.consumer.analyzer_metrics import PRIMARY, AnalyzerMeter
from sentinel_platform.streams.consumer.metrics import Metrics
from sentinel_platform.streams.consumer.processor import Busy
from sentinel_platform.streams.plumbing.connection import RedisClient
from workers.analyzer.answers.billed import UnusableAnswer
from workers.analyzer.answers.replies import (
    MAX_RETRY_AFTER_S,
    AnalyzerBusy,
    AnalyzerDown,
    AnalyzerError,
    AnalyzerExhausted,
    AnalyzerTimeout,
    AnalyzerWaiting,
    Assessment,
    CircuitOpenError,
    MessageRefused,
    NoFreeConnection,
    Usage,
    describe,
    parse_assessment,
    retry_after_seconds,
)
from workers.analyzer.apis.model_api import Analyzer, ModelApi
from workers.analyzer.apis.sentinel_api import SentinelApi
from workers.analyzer.breaker import STATE_VALUES, CircuitBreaker, Ticket, Transition
from workers.analyzer.exchange import Exchange
from workers.analyzer.health import Health
from workers.analyzer.keys.key_source import KeySource
from workers.analyzer.limits.fleet_limits import (
    EXHAUSTED,
    FleetBusy,
    FleetExhausted,
    FleetHeld,
    FleetLimits,
    analyzer_key_id,
)
from workers.analyzer.limits.token_budget import TokenBudget, reservation
from workers.analyzer.prompts import Prompt
from workers.analyzer.transport import (
    split_credentials,
)

__all__ = [
    "MAX_RETRY_AFTER_S",
    "Analyzer",
    "AnalyzerBusy",
    "AnalyzerDown",
    "AnalyzerError",
    "AnalyzerExhausted",
    "AnalyzerTimeout",
    "Assessment",
    "CircuitOpenError",
    "HttpAnalyzer",
    "NoFreeConnection",
    "parse_assessment",
    "retry_after_seconds",
]

log = logging.getLogger(__name__)

WhenDown = Literal["rules", "wait"]
#: Connections one analyzer keeps alive when not told otherwise: one message at a time.
POOL_SIZE = 1
DEFAULT_BREAKER_FAILURES = 5
DEFAULT_BREAKER_COOLDOWN_S = 30.0
#: With ``SENTINEL_ANALYZER_WHEN_DOWN=wait``, a message held by an exhaustion is looked at
#: again after at most this long, so a released hold is noticed without a restart.
EXHAUSTED_RECHECK_S = 30.0


class HttpAnalyzer:
    """POSTs one message to ``url`` in the shape ``api`` builds (default: the platform's
    own ``{"kind": "transaction"|"axiom", "payload": {...}}``; a model API also sends the
    message's stream's prompt from ``prompts``, by kind) and reads the reply with ``api``.
    A non-2xx answer's capped body and headers go to ``api.misconfigured``, then to
    :func:`~workers.analyzer.answers.refusals.refusal`, for what it means.

    One analyzer holds one connection pool for its whole life (a worker builds one) and
    is shared by all the worker's threads. The pool holds up to ``max_connections``
    (the worker's largest in-flight limit), kept alive across calls, and *blocks*: a
    thread that finds them all busy waits for one instead of opening another, and if
    none comes free within ``timeout_s`` it raises :class:`NoFreeConnection` (a
    :class:`Busy`): waiting for a local connection says nothing about the analyzer, so
    that wait is neither a failure nor part of the call's own timeout. ``timeout_s``
    then bounds connecting, waiting for the reply and reading it. Nothing is
    retried here: a busy answer goes back to the consumer loop, which calls again
    later. Credentials in the URL (``https://user:password@host/...``) are sent as HTTP
    Basic auth, never in the request line. An axiom's W3C trace context travels as
    ``traceparent``/``tracestate`` headers, so the analyzer's spans join the trace.

    Before each call the fleet's hold is checked (:class:`FleetLimits`: a
    ``Retry-After`` any worker received), then the breaker, then a slot of the fleet's
    optional rate limit and the call's tokens (:class:`TokenBudget`, settled with the
    answer's ``usage``, paced by what answers announce) are taken (so a call the breaker
    refuses takes none). The breaker:
    a call that fails as *down* or *wrong* counts as a failure, and while it is open a
    call raises :class:`CircuitOpenError` at once. A *busy* answer counts neither way
    and sets the fleet's hold for its ``Retry-After``. With ``when_down="wait"`` every
    *down* outcome, an open breaker included, is raised as :class:`Busy` instead.

    Breaker changes are logged (``analyzer_circuit``) and, once :meth:`bind_metrics`
    has been called, counted with every call's outcome. Health changes are logged once
    each (``analyzer_unavailable`` / ``analyzer_busy``, then ``analyzer_recovered``), not
    once per message.
    """

    def __init__(
        self,
        url: str,
        timeout_s: float,
        max_connections: int = POOL_SIZE,
        breaker: CircuitBreaker | None = None,
        when_down: WhenDown = "rules",
        limits: FleetLimits | None = None,
        api: ModelApi | None = None,
        prompts: Mapping[str, Prompt] | None = None,
        budget: TokenBudget | None = None,
        key_file: Path | None = None,
    ) -> None:
        problem = url_problem(url, ("http", "https"), needs_host=True)
        if problem:
            raise ValueError(f"analyzer URL {redact_url(url)!r} {problem}")
        if timeout_s <= 0:
            raise ValueError(f"analyzer timeout must be positive, got {timeout_s}")
        if max_connections < 1:
            raise ValueError(f"analyzer connections must be at least 1, got {max_connections}")
        if when_down not in ("rules", "wait"):
            raise ValueError(f"when_down must be rules or wait, got {when_down!r}")
        self.url = url
        self.timeout_s = timeout_s
        self.max_connections = max_connections
        self.when_down: WhenDown = when_down
        self.breaker = breaker or CircuitBreaker(
            DEFAULT_BREAKER_FAILURES, DEFAULT_BREAKER_COOLDOWN_S
        )
        self.limits = limits or FleetLimits(analyzer_key_id(url), analyzer_url=url)
        self.api: ModelApi = api or SentinelApi()
        self.prompts: Mapping[str, Prompt] = dict(prompts or {})
        self.budget = budget or TokenBudget(self.limits.analyzer_id)
        target = split_credentials(url)[0]
        self.keys = KeySource.for_api(self.api, target, self.limits.analyzer_id, url, key_file)
        self.exchange = Exchange(
            url, self.api, timeout_s, max_connections, self.limits, self.budget, self.keys
        )
        self._bound: dict[str, Any] = {}  # the worker's stream, group, consumer
        self.health = Health(self._log_fields)
        self._meter: AnalyzerMeter | None = None

    def __repr__(self) -> str:
        return f"HttpAnalyzer({redact_url(self.url)!r}, timeout_s={self.timeout_s})"

    def close(self) -> None:
        """Wake any call waiting for a rate slot (it raises :class:`Busy`) and close the
        kept-alive connections."""
        self.limits.close()
        self.budget.close()
        self.exchange.close()

    def bind_log_fields(self, fields: Mapping[str, Any]) -> None:
        """Put the worker's ``fields`` (stream, group, consumer) on every line of this
        analyzer from now on, and log what it will call (``analyzer_configured``: the
        redacted URL, the API, the model, the timeout in force). Called once at start-up."""
        self._bound = dict(fields)
        self.health.bind(self._bound)
        model = getattr(self.api, "model", None)
        described = {"api": self.api.kind, "model": model, "when_down": self.when_down}
        described["key"] = self.keys.fingerprint
        log.info("analyzer_configured", extra={**self._log_fields, **described})

    def bind_metrics(self, metrics: Metrics, role: str = PRIMARY) -> None:
        """Count calls and breaker changes in ``metrics`` under ``role`` (a lane's second
        analyzer: ``fallback``, ``shadow``) and read the breaker's state at every scrape
        (``analyzer_circuit_state``). Called once at start-up, before the threads run."""
        self._meter = meter = metrics.analyzer(role)
        meter.circuit_state_from(self._circuit_state_now)
        self.health.bind_metrics(meter)

    def _circuit_state_now(self) -> float:
        """The breaker's state as true when read (a scrape), not as of the last call."""
        return STATE_VALUES[self.breaker.state_now()]

    def bind_redis(self, client: RedisClient) -> None:
        """Share the ``Retry-After`` hold and the rate limit with the fleet through
        ``client`` (the worker's own). Called once at start-up."""
        self.limits.bind(client)
        self.budget.bind(client)
        self.keys.holds.bind(client)

    def bind_stop(self, stop: threading.Event) -> None:
        """The worker's stop (SIGTERM/SIGINT): it ends a wait for a rate slot at once,
        and the waiting call is not made. Called once at start-up."""
        self.limits.bind_stop(stop)
        self.budget.bind_stop(stop)

    def assess_transaction(self, txn: Transaction) -> Assessment:
        return self._post("transaction", shown(txn).payload(), {})  # never its truth

    def assess_axiom(self, axiom: Axiom) -> Assessment:
        trace = {"traceparent", "tracestate"}
        headers = {k: v for k in trace if (v := getattr(axiom, k)) is not None}
        payload = axiom.model_dump(mode="json", exclude_none=True, exclude=trace)
        return self._post("axiom", payload, headers)

    def _post(self, kind: str, payload: dict[str, Any], headers: dict[str, str]) -> Assessment:
        try:
            self.limits.check_hold()
            self.keys.check_hold()  # the key in use rejected (another key is not held)
        except FleetExhausted as held:  # a call of the fleet was told to stop
            raise self._held_exhausted(held) from None
        except FleetHeld as held:  # logged once, as the hold begins for this worker
            self._count("busy")
            self.health.now("busy", held.reason, cause=held.cause, held_s=held.left_s)
            raise
        epoch, admission = self.health.epoch, self.breaker.admit()
        self._changed(admission.transition)
        if admission.ticket is None:
            self._count(CircuitOpenError.outcome)
            raise self._when_down(self._open_error(admission.retry_in_s), admission.retry_in_s)
        try:
            # A rate slot and the call's tokens are taken only for a call the breaker lets out.
            self.limits.reserve()
            prompt = self.prompts.get(kind)
            body = self.api.request(kind, payload, prompt)
            max_tokens = getattr(self.api, "max_output_tokens", 0)
            tokens = reservation(len(body), max_tokens)
            try:
                self.budget.reserve(tokens)
            except AnalyzerExhausted as exc:  # the daily budget: held as ``Exchange.call`` holds
                self.limits.hold(exc.until_s, f"{exc.cause}: {exc}", cause=EXHAUSTED)
                raise
            try:
                assessment = self.exchange.call(body, prompt, headers)
            except UnusableAnswer as exc:  # billed without a verdict: counted all the same
                self._settle(tokens, max_tokens, exc.usage, exc.model)
                raise
            self._settle(tokens, max_tokens, assessment.usage, assessment.model)
        except FleetExhausted as held:  # refused while it waited for a connection: never sent
            self._changed(self.breaker.released(admission.ticket))
            raise self._held_exhausted(held) from None
        except (FleetBusy, NoFreeConnection):  # never sent: nothing learnt
            self._count("busy")
            self._changed(self.breaker.released(admission.ticket))
            raise
        except AnalyzerBusy as busy:
            self._busy(admission.ticket, busy)
            raise
        except MessageRefused as exc:  # this message's alone: no hold, not a failure
            self._count(exc.outcome)
            self._changed(
                (self.breaker.busy if exc.sent else self.breaker.released)(admission.ticket)
            )
            log.warning("analyzer_refused_message", extra={**self._log_fields, "reason": str(exc)})
            raise exc.when_down(self.when_down) from None
        except AnalyzerExhausted as exc:
            self._exhausted(admission.ticket, exc)
            raise self._when_down(exc, None) from None
        except AnalyzerError as exc:
            self._failed(admission.ticket, exc)
            raise self._when_down(exc, None) from None
        except BaseException as exc:  # never leave a probe out forever
            self._changed(self.breaker.failed(admission.ticket, describe(exc)))
            raise
        finally:  # no answer learnt (none came, or never sent): the next call probes
            self.budget.first_call.release()
        self._count("ok")
        self._changed(self.breaker.succeeded(admission.ticket))
        self.health.now("healthy", "", epoch=epoch)  # unless exhausted since it was sent
        return assessment

    def _held_exhausted(self, held: FleetExhausted) -> Exception:
        """A call not made because the fleet is held for an exhaustion: counted and
        reported as one, then what ``SENTINEL_ANALYZER_WHEN_DOWN`` makes of it."""
        cause, _, detail = held.reason.partition(": ")
        self._count(AnalyzerExhausted.outcome)
        self.health.now("exhausted", detail, cause)
        return self._when_down(AnalyzerExhausted(held.reason, None, cause), None)

    def _open_error(self, retry_in_s: float) -> CircuitOpenError:
        if self.breaker.state == "half_open":
            return CircuitOpenError("circuit open: one probe call is testing the analyzer")
        return CircuitOpenError(
            f"circuit open: the analyzer is not asked for another {retry_in_s:.1f}s"
        )

    def _when_down(self, exc: AnalyzerError, retry_in_s: float | None) -> Exception:
        """``exc`` itself, or, when the setting says wait, :class:`Busy` for "down" and
        :class:`FleetExhausted` for "exhausted" (looked at again within
        ``EXHAUSTED_RECHECK_S``: a hold may be released at any time)."""
        if self.when_down == "wait" and isinstance(exc, AnalyzerExhausted):
            return FleetExhausted(EXHAUSTED_RECHECK_S, f"waiting for the analyzer: {exc}")
        if self.when_down == "wait" and isinstance(exc, AnalyzerDown):
            kind = Busy if isinstance(exc, AnalyzerTimeout) else AnalyzerWaiting  # a drop?
            return kind(retry_in_s or None, f"waiting for the analyzer: {exc}")
        return exc

    def _exhausted(self, ticket: Ticket, exc: AnalyzerExhausted) -> None:
        """Hold the whole fleet (until the answer's reset, else until released); not an
        outage for the breaker: the analyzer answered, and asking again cannot help."""
        self._count(exc.outcome)
        self._changed(self.breaker.busy(ticket))  # the fleet's hold is set (``Exchange.call``)
        self.health.now("exhausted", str(exc), exc.cause)

    def _busy(self, ticket: Ticket, busy: AnalyzerBusy) -> None:
        self._count("busy")
        self._changed(self.breaker.busy(ticket))  # any Retry-After hold is set (``Exchange.call``)
        self.health.now("busy", busy.reason)

    def _failed(self, ticket: Ticket, exc: AnalyzerError) -> None:
        self._count(exc.outcome)
        self._changed(self.breaker.failed(ticket, str(exc)))
        self.health.now("unavailable", str(exc))

    def _changed(self, transition: Transition | None) -> None:
        """Log and count one change of the breaker (nothing when there was none)."""
        if transition is None:
            return
        fields = {
            **self._bound,
            "analyzer": redact_url(self.url),
            "state": transition.state,
            "previous": transition.previous,
            "reason": transition.reason,
            "cooldown_s": transition.cooldown_s,
        }
        level = logging.WARNING if transition.state == "open" else logging.INFO
        log.log(level, "analyzer_circuit", extra=fields)
        if self._meter is not None:
            self._meter.count_circuit_change(transition.state)

    def _count(self, outcome: str) -> None:
        if self._meter is not None:
            self._meter.count_call(outcome)

    def _settle(
        self, reserved: int, max_tokens: int, usage: Usage | None, model: str | None
    ) -> None:
        """What an answer was billed, verdict or not: settled in the budget (the daily
        counter) and counted (``analyzer_tokens``)."""
        self.budget.settle(self.api.kind, reserved, max_tokens, usage)
        if self._meter is not None and usage is not None:
            tokens = (usage.input_tokens, usage.output_tokens, usage.cached_input_tokens)
            self._meter.count_tokens(model, *tokens)

    @property
    def _log_fields(self) -> dict[str, Any]:
        return {
            **self._bound,
            "analyzer": redact_url(self.url),
            "analyzer_id": self.limits.analyzer_id,
            "timeout_s": self.timeout_s,
        }
