"""An optional second opinion for the processors, behind a small interface.

The rules in :mod:`workers.processors` always work; an analyzer (an HTTP service, in the
original a hosted model) may know better but can be slow, down or wrong. So the
processors treat it as advice: every way it can fail surfaces as :class:`AnalyzerError`,
and the caller falls back to the rules. The HTTP client keeps its connections alive
across messages (urllib3's pool) and validates the reply strictly, because a
half-understood answer is worse than none.
"""

from __future__ import annotations

import json
import logging
import time
from dataclasses import dataclass
from typing import Any, Protocol, get_args
from urllib.parse import unquote, urlsplit, urlunsplit

import urllib3
from urllib3.util import make_headers

from sentinel_platform.redaction import scrub
from sentinel_platform.schemas import Axiom, RiskLevel, Transaction
from sentinel_platform.settings import Settings, SettingsError, redact_url, url_problem

log = logging.getLogger(__name__)

RISK_LEVELS: tuple[str, ...] = get_args(RiskLevel)
#: A reply larger than this is not an assessment; refuse it rather than buffer it.
MAX_REPLY_BYTES = 64 * 1024
NARRATIVE_MAX_CHARS = 4000
READ_CHUNK_BYTES = 16 * 1024
#: Connections one analyzer keeps alive; a worker asks one message at a time.
POOL_SIZE = 2
JSON_HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}


class AnalyzerError(RuntimeError):
    """The analyzer could not give a usable answer (unreachable, slow, HTTP error, bad reply)."""


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


class HttpAnalyzer:
    """POSTs ``{"kind": "transaction"|"axiom", "payload": {...}}`` as JSON to ``url``.

    One analyzer holds one connection pool for its whole life (a worker builds one), so
    consecutive calls reuse a kept-alive TCP/TLS connection instead of opening one per
    message. ``timeout_s`` bounds connecting, waiting for the reply and reading it: a call
    gives up after about ``timeout_s``, twice that at the very worst. Nothing is retried:
    the caller's fallback is the answer to a failed call, and a retry would only double
    the time a failing analyzer costs each message. Credentials in the URL
    (``https://user:password@host/...``) are sent as HTTP Basic auth, never in the request
    line. An axiom's W3C trace context travels as ``traceparent``/``tracestate`` headers,
    not in the body, so the analyzer's spans join the producer's trace.

    Health changes are logged once each (``analyzer_unavailable`` with the error, then
    ``analyzer_recovered``), not once per message, so an outage does not flood the log.
    """

    def __init__(self, url: str, timeout_s: float, max_connections: int = POOL_SIZE) -> None:
        problem = url_problem(url, ("http", "https"), needs_host=True)
        if problem:
            raise ValueError(f"analyzer URL {redact_url(url)!r} {problem}")
        if timeout_s <= 0:
            raise ValueError(f"analyzer timeout must be positive, got {timeout_s}")
        self.url = url
        self.timeout_s = timeout_s
        self._target, credentials = split_credentials(url)
        self._headers = {**JSON_HEADERS, **credentials}
        self._healthy = True
        self._pool = urllib3.PoolManager(
            num_pools=1,
            maxsize=max_connections,
            timeout=urllib3.Timeout(total=timeout_s, connect=timeout_s, read=timeout_s),
            retries=False,
        )

    def __repr__(self) -> str:
        return f"HttpAnalyzer({redact_url(self.url)!r}, timeout_s={self.timeout_s})"

    def close(self) -> None:
        """Close the kept-alive connections."""
        self._pool.clear()

    def assess_transaction(self, txn: Transaction) -> Assessment:
        return self._post("transaction", txn.model_dump(mode="json", exclude_none=True), {})

    def assess_axiom(self, axiom: Axiom) -> Assessment:
        trace = {"traceparent", "tracestate"}
        headers = {k: v for k in trace if (v := getattr(axiom, k)) is not None}
        payload = axiom.model_dump(mode="json", exclude_none=True, exclude=trace)
        return self._post("axiom", payload, headers)

    def _post(self, kind: str, payload: dict[str, Any], headers: dict[str, str]) -> Assessment:
        try:
            assessment = self._call(kind, payload, headers)
        except AnalyzerError as exc:
            if self._healthy:
                log.warning("analyzer_unavailable", extra={**self._log_fields, "error": str(exc)})
            self._healthy = False
            raise
        if not self._healthy:
            log.info("analyzer_recovered", extra=self._log_fields)
        self._healthy = True
        return assessment

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
            )
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            # Refused, reset, timed out, TLS failures: all mean "no answer".
            raise AnalyzerError(f"analyzer unreachable ({describe(exc)})") from None
        kept = False
        try:
            if not 200 <= response.status < 300:
                raise AnalyzerError(f"analyzer answered HTTP {response.status}")
            reply = read_reply(response, deadline)
            kept = True
        finally:
            if not kept:
                response.close()  # an unread or half-read body: do not reuse the connection
            response.release_conn()
        return parse_assessment(reply)


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
    """The configured analyzer, or None for rules only. A bad URL fails start-up."""
    if settings.analyzer_url is None:
        return None
    try:
        return HttpAnalyzer(settings.analyzer_url.get_secret_value(), settings.analyzer_timeout_s)
    except ValueError as exc:
        raise SettingsError(f"SENTINEL_ANALYZER_URL: {exc}") from None
