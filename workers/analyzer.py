"""An optional second opinion for the processors, behind a small interface.

The rules in :mod:`workers.processors` always work; an analyzer (an HTTP service, in the
original a hosted model) may know better but can be slow, down or wrong. So the
processors treat it as advice: every way it can fail surfaces as :class:`AnalyzerError`,
and the caller falls back to the rules. The HTTP client uses only the standard library
and validates the reply strictly, because a half-understood answer is worse than none.
"""

from __future__ import annotations

import http.client
import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Any, Protocol, get_args
from urllib.parse import urlsplit

from sentinel_platform.schemas import Axiom, RiskLevel, Transaction
from sentinel_platform.settings import Settings, SettingsError, redact_url

RISK_LEVELS: tuple[str, ...] = get_args(RiskLevel)
#: A reply larger than this is not an assessment; refuse it rather than buffer it.
MAX_REPLY_BYTES = 64 * 1024
NARRATIVE_MAX_CHARS = 4000


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

    ``timeout_s`` bounds connecting and each read of the socket. An axiom's W3C trace
    context travels as ``traceparent``/``tracestate`` headers, not in the body, so the
    analyzer's spans join the producer's trace.
    """

    def __init__(self, url: str, timeout_s: float) -> None:
        if urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).hostname:
            raise ValueError(f"analyzer URL {redact_url(url)!r} is not an http(s):// URL")
        if timeout_s <= 0:
            raise ValueError(f"analyzer timeout must be positive, got {timeout_s}")
        self.url = url
        self.timeout_s = timeout_s

    def __repr__(self) -> str:
        return f"HttpAnalyzer({redact_url(self.url)!r}, timeout_s={self.timeout_s})"

    def assess_transaction(self, txn: Transaction) -> Assessment:
        return self._post("transaction", txn.model_dump(mode="json", exclude_none=True), {})

    def assess_axiom(self, axiom: Axiom) -> Assessment:
        trace = {"traceparent", "tracestate"}
        headers = {k: v for k in trace if (v := getattr(axiom, k)) is not None}
        payload = axiom.model_dump(mode="json", exclude_none=True, exclude=trace)
        return self._post("axiom", payload, headers)

    def _post(self, kind: str, payload: dict[str, Any], headers: dict[str, str]) -> Assessment:
        body = json.dumps({"kind": kind, "payload": payload}).encode()
        request = urllib.request.Request(
            self.url,
            data=body,
            method="POST",
            headers={"Content-Type": "application/json", "Accept": "application/json", **headers},
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as response:
                reply = response.read(MAX_REPLY_BYTES + 1)
        except urllib.error.HTTPError as exc:
            raise AnalyzerError(f"analyzer answered HTTP {exc.code}") from None
        except (OSError, http.client.HTTPException) as exc:
            # URLError, timeouts, refused and reset connections are all OSErrors.
            raise AnalyzerError(f"analyzer unreachable ({type(exc).__name__}: {exc})") from None
        if len(reply) > MAX_REPLY_BYTES:
            raise AnalyzerError(f"reply larger than {MAX_REPLY_BYTES} bytes")
        return parse_assessment(reply)


def analyzer_from_settings(settings: Settings) -> HttpAnalyzer | None:
    """The configured analyzer, or None for rules only. A bad URL fails start-up."""
    if not settings.analyzer_url:
        return None
    try:
        return HttpAnalyzer(settings.analyzer_url, settings.analyzer_timeout_s)
    except ValueError as exc:
        raise SettingsError(f"SENTINEL_ANALYZER_URL: {exc}") from None
