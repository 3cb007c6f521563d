"""An optional second opinion for the processors, behind a small interface.

The rules in :mod:`workers.processors` always work; an analyzer (an HTTP service, in the
original a hosted model) may know better but can be slow, down or wrong. So the
processors treat it as advice: every way it can fail surfaces as :class:`AnalyzerError`,
and the caller falls back to the rules. The HTTP client keeps its connections alive
across messages (urllib3's pool, at most one connection per message a worker handles at
once) and validates the reply strictly, because a half-understood answer is worse than
none. A circuit breaker (:mod:`workers.circuit_breaker`) stops asking an analyzer that
keeps failing, so its outage costs each message milliseconds instead of the timeout
(``docs/analyzer.md``).
"""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any, Protocol, get_args
from urllib.parse import unquote, urlsplit, urlunsplit

import urllib3
from urllib3.util import make_headers

from sentinel_platform.redaction import scrub
from sentinel_platform.schemas import Axiom, RiskLevel, Transaction
from sentinel_platform.settings import Settings, SettingsError, redact_url, url_problem
from sentinel_platform.streams.consumer.metrics import Metrics
from workers.circuit_breaker import STATE_VALUES, CircuitBreaker, Ticket, Transition

log = logging.getLogger(__name__)

RISK_LEVELS: tuple[str, ...] = get_args(RiskLevel)
#: A reply larger than this is not an assessment; refuse it rather than buffer it.
MAX_REPLY_BYTES = 64 * 1024
NARRATIVE_MAX_CHARS = 4000
READ_CHUNK_BYTES = 16 * 1024
#: Connections one analyzer keeps alive when not told otherwise: one message at a time.
POOL_SIZE = 1
DEFAULT_BREAKER_FAILURES = 5
DEFAULT_BREAKER_COOLDOWN_S = 30.0
#: A longer ``Retry-After`` is cut to this: a bogus header must not switch the analyzer
#: off for days.
MAX_RETRY_AFTER_S = 3600.0
#: Answers that mean "not now": with a ``Retry-After`` they open the breaker for that long.
BACK_OFF_STATUSES = (429, 503)
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}
_DELAY_SECONDS = re.compile(r"[0-9]+")


class AnalyzerError(RuntimeError):
    """The analyzer could not give a usable answer (unreachable, slow, HTTP error, bad reply).

    ``outcome`` is the label of the ``analyzer_calls`` metric the failure counts under.
    """

    outcome = "error"


class AnalyzerTimeout(AnalyzerError):
    """No answer within the timeout (connecting, waiting for a free connection, reading)."""

    outcome = "timeout"


class AnalyzerBackOff(AnalyzerError):
    """HTTP 429, or 503 with ``Retry-After``: the analyzer asked for quiet, for
    ``retry_after_s`` seconds when it said how long."""

    outcome = "rate_limited"

    def __init__(self, message: str, retry_after_s: float | None) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class CircuitOpenError(AnalyzerError):
    """Not sent: the circuit breaker is open (or half-open with its probe out)."""

    outcome = "rejected_open"


@dataclass(frozen=True)
class Assessment:
    """An analyzer's verdict on one message."""

    is_threat: bool
    risk_level: RiskLevel
    narrative: str


class Analyzer(Protocol):
    """Anything that can assess transactions and axioms; raise ``AnalyzerError`` on failure."""

    def assess_transaction(self, txn: Transaction) -> Assessment: ...

    def assess_axiom(self, axiom: Axiom) -> Assessment: ...


def parse_assessment(body: bytes) -> Assessment:
    """Validate a reply: a JSON object with a bool ``is_threat``, a known ``risk_level`` and
    a string ``narrative``. Anything else raises ``AnalyzerError``."""
    try:
        reply = json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise AnalyzerError(f"reply is not JSON ({exc})") from None
    if not isinstance(reply, dict):
        raise AnalyzerError("reply is not a JSON object")
    is_threat, risk, narrative = (reply.get(k) for k in ("is_threat", "risk_level", "narrative"))
    if not isinstance(is_threat, bool):
        raise AnalyzerError(f"is_threat must be true or false, got {is_threat!r:.40}")
    if risk not in RISK_LEVELS:
        raise AnalyzerError(f"risk_level must be one of {', '.join(RISK_LEVELS)}, got {risk!r:.40}")
    if not isinstance(narrative, str):
        raise AnalyzerError(f"narrative must be a string, got {type(narrative).__name__}")
    return Assessment(is_threat, risk, narrative[:NARRATIVE_MAX_CHARS])


def retry_after_seconds(value: str | None, now: datetime) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait: delay-seconds (``120``) or an
    HTTP date (``Tue, 24 Nov 2026 12:00:30 GMT``; a past date is 0). None when absent or
    not valid (RFC 9110 allows no fraction or sign), so it cannot open the breaker."""
    text = (value or "").strip()
    if _DELAY_SECONDS.fullmatch(text):
        return float(int(text))
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT
        when = when.replace(tzinfo=timezone.utc)
    return max(0.0, (when - now).total_seconds())


class HttpAnalyzer:
    """POSTs ``{"kind": "transaction"|"axiom", "payload": {...}}`` as JSON to ``url``.

    One analyzer holds one connection pool for its whole life (a worker builds one) and
    is shared by all the worker's threads: at most ``max_connections`` (the worker's
    concurrency) connections exist, kept alive across calls, and a thread that finds them
    all busy waits for one (up to ``timeout_s``) instead of opening another, so the
    analyzer never sees more requests at once from a worker than it handles messages.
    ``timeout_s`` bounds connecting, waiting for the reply and reading it: a call gives up
    after about ``timeout_s``, twice that at the very worst. Nothing is retried: the
    caller's fallback is the answer to a failed call, and a retry would only double the
    time a failing analyzer costs each message. Credentials in the URL
    (``https://user:password@host/...``) are sent as HTTP Basic auth, never in the request
    line. An axiom's W3C trace context travels as ``traceparent``/``tracestate`` headers,
    not in the body, so the analyzer's spans join the producer's trace.

    Every call passes ``breaker`` first (:mod:`workers.circuit_breaker`): any
    :class:`AnalyzerError` counts as a failure, and while it is open a call raises
    :class:`CircuitOpenError` at once. HTTP 429, and 503 with ``Retry-After``, open it
    for the ``Retry-After`` (at most ``MAX_RETRY_AFTER_S``); a 429 without one is an
    ordinary failure. Each change of the breaker is logged (``analyzer_circuit``) and,
    once :meth:`bind_metrics` has been called, counted along with every call's outcome.

    Health changes are logged once each (``analyzer_unavailable`` with the error, then
    ``analyzer_recovered``), not once per message, so an outage does not flood the log.
    """

    def __init__(
        self,
        url: str,
        timeout_s: float,
        max_connections: int = POOL_SIZE,
        breaker: CircuitBreaker | None = None,
    ) -> None:
        problem = url_problem(url, ("http", "https"), needs_host=True)
        if problem:
            raise ValueError(f"analyzer URL {redact_url(url)!r} {problem}")
        if timeout_s <= 0:
            raise ValueError(f"analyzer timeout must be positive, got {timeout_s}")
        if max_connections < 1:
            raise ValueError(f"analyzer connections must be at least 1, got {max_connections}")
        self.url = url
        self.timeout_s = timeout_s
        self.max_connections = max_connections
        self.breaker = breaker or CircuitBreaker(
            DEFAULT_BREAKER_FAILURES, DEFAULT_BREAKER_COOLDOWN_S
        )
        self._target, credentials = split_credentials(url)
        self._headers = {**JSON_HEADERS, **credentials}
        self._health_lock = threading.Lock()
        self._healthy = True
        self._metrics: Metrics | None = None
        self._pool = urllib3.PoolManager(
            num_pools=1,
            maxsize=max_connections,
            block=True,
            timeout=urllib3.Timeout(total=timeout_s, connect=timeout_s, read=timeout_s),
            retries=False,
        )

    def __repr__(self) -> str:
        return f"HttpAnalyzer({redact_url(self.url)!r}, timeout_s={self.timeout_s})"

    def close(self) -> None:
        """Close the kept-alive connections."""
        self._pool.clear()

    def bind_metrics(self, metrics: Metrics) -> None:
        """Count calls (``analyzer_calls``) and breaker changes in ``metrics`` from now on.
        Called once at start-up, before the worker's threads run."""
        self._metrics = metrics
        metrics.set_gauge("analyzer_circuit_state", STATE_VALUES[self.breaker.state])

    def assess_transaction(self, txn: Transaction) -> Assessment:
        return self._post("transaction", txn.model_dump(mode="json", exclude_none=True), {})

    def assess_axiom(self, axiom: Axiom) -> Assessment:
        trace = {"traceparent", "tracestate"}
        headers = {k: v for k in trace if (v := getattr(axiom, k)) is not None}
        payload = axiom.model_dump(mode="json", exclude_none=True, exclude=trace)
        return self._post("axiom", payload, headers)

    def _post(self, kind: str, payload: dict[str, Any], headers: dict[str, str]) -> Assessment:
        admission = self.breaker.admit()
        self._changed(admission.transition)
        if admission.ticket is None:
            self._count(CircuitOpenError.outcome)
            if self.breaker.state == "half_open":
                raise CircuitOpenError("circuit open: one probe call is testing the analyzer")
            raise CircuitOpenError(
                f"circuit open: the analyzer is not asked for another {admission.retry_in_s:.1f}s"
            )
        try:
            assessment = self._call(kind, payload, headers)
        except AnalyzerError as exc:
            self._failed(admission.ticket, exc)
            raise
        except BaseException as exc:  # never leave a probe out forever
            self._changed(self.breaker.failed(admission.ticket, describe(exc)))
            raise
        self._count("ok")
        self._changed(self.breaker.succeeded(admission.ticket))
        with self._health_lock:
            recovered, self._healthy = not self._healthy, True
        if recovered:
            log.info("analyzer_recovered", extra=self._log_fields)
        return assessment

    def _failed(self, ticket: Ticket, exc: AnalyzerError) -> None:
        self._count(exc.outcome)
        if isinstance(exc, AnalyzerBackOff) and exc.retry_after_s is not None:
            seconds = min(exc.retry_after_s, MAX_RETRY_AFTER_S)
            self._changed(self.breaker.back_off(ticket, seconds, str(exc)))
        else:
            self._changed(self.breaker.failed(ticket, str(exc)))
        with self._health_lock:
            went_down, self._healthy = self._healthy, False
        if went_down:
            log.warning("analyzer_unavailable", extra={**self._log_fields, "error": str(exc)})

    def _changed(self, transition: Transition | None) -> None:
        """Log and count one change of the breaker (nothing when there was none)."""
        if transition is None:
            return
        fields = {
            "analyzer": redact_url(self.url),
            "state": transition.state,
            "previous": transition.previous,
            "reason": transition.reason,
            "cooldown_s": transition.cooldown_s,
        }
        level = logging.WARNING if transition.state == "open" else logging.INFO
        log.log(level, "analyzer_circuit", extra=fields)
        if self._metrics is not None:
            self._metrics.count("analyzer_circuit_changes", transition.state)
            self._metrics.set_gauge("analyzer_circuit_state", STATE_VALUES[transition.state])

    def _count(self, outcome: str) -> None:
        if self._metrics is not None:
            self._metrics.count("analyzer_calls", outcome)

    @property
    def _log_fields(self) -> dict[str, Any]:
        return {"analyzer": redact_url(self.url), "timeout_s": self.timeout_s}

    def _call(self, kind: str, payload: dict[str, Any], headers: dict[str, str]) -> Assessment:
        body = json.dumps({"kind": kind, "payload": payload}).encode()
        deadline = time.monotonic() + self.timeout_s
        try:
            response = self._pool.request(
                "POST",
                self._target,
                body=body,
                headers={**self._headers, **headers},
                preload_content=False,
                pool_timeout=self.timeout_s,
            )
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            # Refused, reset, timed out, TLS failures: all mean "no answer".
            raise unreachable(exc) from None
        kept = False
        try:
            if not 200 <= response.status < 300:
                raise status_error(response)
            reply = read_reply(response, deadline)
            kept = True
        finally:
            if not kept:
                response.close()  # an unread or half-read body: do not reuse the connection
            response.release_conn()
        return parse_assessment(reply)


def unreachable(exc: BaseException) -> AnalyzerError:
    """The error for a request that got no answer: a timeout (connecting, reading, or no
    free connection in time) or anything else (refused, reset, TLS)."""
    message = f"analyzer unreachable ({describe(exc)})"
    # NewConnectionError subclasses ConnectTimeoutError in urllib3 2: a refusal is no timeout.
    if isinstance(exc, urllib3.exceptions.NewConnectionError):
        return AnalyzerError(message)
    timeouts = (urllib3.exceptions.TimeoutError, urllib3.exceptions.EmptyPoolError, TimeoutError)
    if isinstance(exc, timeouts):
        return AnalyzerTimeout(message)
    return AnalyzerError(message)


def status_error(response: urllib3.BaseHTTPResponse) -> AnalyzerError:
    """The error for a non-2xx answer; 429, and 503 with ``Retry-After``, ask for quiet."""
    message = f"analyzer answered HTTP {response.status}"
    if response.status not in BACK_OFF_STATUSES:
        return AnalyzerError(message)
    seconds = retry_after_seconds(response.headers.get("Retry-After"), datetime.now(timezone.utc))
    if seconds is None:
        return AnalyzerBackOff(message, None) if response.status == 429 else AnalyzerError(message)
    return AnalyzerBackOff(f"{message} with Retry-After {seconds:g}s", seconds)


def read_reply(response: urllib3.BaseHTTPResponse, deadline: float) -> bytes:
    """The whole body, refusing one larger than ``MAX_REPLY_BYTES`` or slower than ``deadline``.

    Reads one socket read at a time, so a server that trickles bytes cannot stretch the
    call past the deadline by more than one read timeout.
    """
    chunks: list[bytes] = []
    size = 0
    try:
        while chunk := response.read1(READ_CHUNK_BYTES):
            size += len(chunk)
            if size > MAX_REPLY_BYTES:
                raise AnalyzerError(f"reply larger than {MAX_REPLY_BYTES} bytes")
            if time.monotonic() > deadline:
                raise AnalyzerError("reply took longer than the timeout to arrive")
            chunks.append(chunk)
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise AnalyzerError(f"analyzer reply broke off ({describe(exc)})") from None
    return b"".join(chunks)


def describe(exc: BaseException) -> str:
    """``Type: message`` with any credential-bearing URL in the message hidden."""
    return scrub(f"{type(exc).__name__}: {exc}")


def split_credentials(url: str) -> tuple[str, dict[str, str]]:
    """The URL without its user-info, and the Basic auth header it stood for (if any)."""
    parts = urlsplit(url)
    if parts.username is None and parts.password is None:
        return url, {}
    netloc = parts.netloc.rpartition("@")[2]
    target = urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
    user, password = unquote(parts.username or ""), unquote(parts.password or "")
    return target, make_headers(basic_auth=f"{user}:{password}")


def analyzer_from_settings(settings: Settings) -> HttpAnalyzer | None:
    """The configured analyzer, or None for rules only. A bad URL fails start-up.

    Its pool holds one connection per message the worker handles at once
    (``SENTINEL_WORKER_CONCURRENCY``), and its breaker follows
    ``SENTINEL_ANALYZER_BREAKER_FAILURES`` / ``SENTINEL_ANALYZER_BREAKER_COOLDOWN_S``."""
    if settings.analyzer_url is None:
        return None
    breaker = CircuitBreaker(
        settings.analyzer_breaker_failures, settings.analyzer_breaker_cooldown_s
    )
    try:
        return HttpAnalyzer(
            settings.analyzer_url.get_secret_value(),
            settings.analyzer_timeout_s,
            max_connections=settings.worker_concurrency,
            breaker=breaker,
        )
    except ValueError as exc:
        raise SettingsError(f"SENTINEL_ANALYZER_URL: {exc}") from None
