"""What the analyzer's answers mean: the errors, a valid assessment, "busy" and "down".

Pure functions of an HTTP answer (and the clock, for a ``Retry-After`` date), kept apart
from the client in :mod:`workers.analyzer.client` so each is table-tested. Three kinds of answer
other than a valid assessment matter to the caller:

* **busy**: HTTP 429, or 503 with ``Retry-After`` (the whole table is
  :mod:`workers.analyzer.answers.waits`): the analyzer is up but at capacity. That is
  backpressure, :class:`~sentinel_platform.streams.consumer.processor.Busy`, never a
  failure: it must not open the circuit breaker nor cost a message its AI verdict.
* **down** (:class:`AnalyzerDown`): no answer (refused, reset, timed out) or a 5xx
  without ``Retry-After``: the analyzer cannot answer now; the breaker counts it and
  ``SENTINEL_ANALYZER_WHEN_DOWN`` chooses between the rules and waiting.
* **wrong** (a plain :class:`AnalyzerError`): a 4xx, a reply outside the contract. The
  analyzer answered, badly; waiting would not change that, so the rules decide.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone
from email.utils import parsedate_to_datetime
from typing import Any, get_args

import urllib3

from sentinel_platform.redaction import scrub
from sentinel_platform.schemas import RiskLevel
from sentinel_platform.streams.consumer.processor import Busy, Unprocessable

RISK_LEVELS: tuple[str, ...] = get_args(RiskLevel)
NARRATIVE_MAX_CHARS = 4000
#: A longer ``Retry-After`` is cut to this: a bogus header must not stop the calls for days.
MAX_RETRY_AFTER_S = 3600.0
_DELAY_SECONDS = re.compile(r"[0-9]+")


class AnalyzerError(RuntimeError):
    """The analyzer could not give a usable answer (unreachable, slow, HTTP error, bad reply).

    ``outcome`` is the label of the ``analyzer_calls`` metric the failure counts under.
    """

    outcome = "error"


class AnalyzerDown(AnalyzerError):
    """The analyzer cannot answer now: refused, reset, TLS failure, 5xx without
    ``Retry-After``. ``SENTINEL_ANALYZER_WHEN_DOWN=wait`` makes it :class:`Busy`."""


class AnalyzerTimeout(AnalyzerDown):
    """No answer within the timeout (connecting or reading)."""

    outcome = "timeout"


class CircuitOpenError(AnalyzerDown):
    """Not sent: the circuit breaker is open (or half-open with its probe out)."""

    outcome = "rejected_open"


class AnalyzerExhausted(AnalyzerError):
    """The analyzer will not answer until something changes outside the fleet: a quota
    or spend limit spent, a rejected key. Retrying does not help, so the whole fleet stops
    calling it (a hold until ``until_s`` seconds from now, or until an operator releases it
    when None) and the messages follow ``SENTINEL_ANALYZER_WHEN_DOWN``. ``cause`` is a
    short word for operators (``insufficient_quota``, ``rejected_key``, ...)."""

    outcome = "exhausted"

    def __init__(self, message: str, until_s: float | None, cause: str) -> None:
        super().__init__(message)
        self.until_s = until_s
        self.cause = cause


class MessageRefused(AnalyzerError):
    """The analyzer cannot take *this* message (it does not fit the model's context), and
    asking again would only repeat the refusal. The analyzer itself is fine: the breaker
    does not count it, the fleet is not held, and the other messages are called for as
    before. Under ``SENTINEL_ANALYZER_WHEN_DOWN=rules`` the rules decide the message;
    under ``wait``, which would wait for ever, it is dead-lettered
    (:meth:`when_down`). ``sent`` is False for one refused before it was sent (the
    model's context known and the message past it): the analyzer was not asked."""

    def __init__(self, message: str, sent: bool = True) -> None:
        super().__init__(message)
        self.sent = sent

    def when_down(self, mode: str) -> Exception:
        """What the processor gets under ``SENTINEL_ANALYZER_WHEN_DOWN=mode``: this error
        (the rules decide), or for ``wait`` :class:`Unprocessable` with the reason (the
        consumer dead-letters the message with its whole payload)."""
        if mode == "wait":
            return Unprocessable(f"the analyzer cannot take this message: {self}")
        return self


class AnalyzerBusy(Busy):
    """The analyzer answered "busy" (429, or 503 with ``Retry-After``)."""


class NoFreeConnection(Busy):
    """No connection of the worker's own pool came free within the timeout: the call was
    never sent, so it says nothing about the analyzer."""

    sent = False


class AnalyzerWaiting(Busy):
    """``SENTINEL_ANALYZER_WHEN_DOWN=wait``: the analyzer is down (refused, a 5xx, its
    breaker open) and the message waits for it. That is no sign of its capacity, so the
    in-flight limit is not cut for it (``sent`` False): cut for every call of an outage,
    it sat at 1 under a 20 s ceiling once the analyzer answered again. A timeout is the
    exception, raised as a plain :class:`Busy`: a slow answer is the limit's drop."""

    sent = False


@dataclass(frozen=True)
class Usage:
    """What one model call cost, as the API reported it: prompt tokens (cached ones
    included), completion tokens, and the prompt tokens served from the provider's prompt
    cache (None where the answer does not say)."""

    input_tokens: int
    output_tokens: int
    cached_input_tokens: int | None = None

    def recorded(self) -> dict[str, str]:
        """The token fields a result entry records (strings, as stream fields are)."""
        fields = {"input_tokens": str(self.input_tokens), "output_tokens": str(self.output_tokens)}
        if self.cached_input_tokens is not None:
            fields["cached_input_tokens"] = str(self.cached_input_tokens)
        return fields


@dataclass(frozen=True)
class Assessment:
    """An analyzer's verdict on one message. A model API's verdict also names the model
    that answered, the prompt's version (a content hash) and the tokens it cost; today's
    ``sentinel`` contract reports none of them."""

    is_threat: bool
    risk_level: RiskLevel
    narrative: str
    model: str | None = None
    prompt_version: str | None = None
    usage: Usage | None = None
    #: which analyzer decided: ``primary``, or ``fallback`` (the second model asked when
    #: the first could not be, :class:`~workers.analyzer.lanes.fallback.FallbackAnalyzer`)
    role: str = "primary"
    #: how long the call took, from sending the request to reading the answer (not the
    #: waits for a rate slot or a connection before it)
    latency_ms: int | None = None

    def recorded(self) -> dict[str, str]:
        """The extra fields a result entry records for this verdict (strings, as stream
        fields are): always ``analyzer_role``, then what the verdict reports."""
        fields: dict[str, str] = {"analyzer_role": self.role}
        if self.latency_ms is not None:
            fields["latency_ms"] = str(self.latency_ms)
        if self.model is not None:
            fields["model"] = self.model
        if self.prompt_version is not None:
            fields["prompt_version"] = self.prompt_version
        if self.usage is not None:
            fields.update(self.usage.recorded())
        return fields


def json_reply(body: bytes) -> dict[str, Any]:
    """A reply's JSON object, or :class:`AnalyzerError` (every API's replies are one)."""
    try:
        reply = json.loads(body)
    except (UnicodeDecodeError, ValueError) as exc:
        raise AnalyzerError(f"reply is not JSON ({exc})") from None
    if not isinstance(reply, dict):
        raise AnalyzerError("reply is not a JSON object")
    return reply


def parse_assessment(body: bytes) -> Assessment:
    """Validate a reply: a JSON object with a bool ``is_threat``, a known ``risk_level`` and
    a string ``narrative``. Anything else raises ``AnalyzerError``."""
    reply = json_reply(body)
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
    HTTP date (``Tue, 24 Nov 2026 12:00:30 GMT``; a past date is 0), at most
    ``MAX_RETRY_AFTER_S``. None when absent or not valid (RFC 9110 allows no fraction
    or sign)."""
    text = (value or "").strip()
    if _DELAY_SECONDS.fullmatch(text):
        return min(float(int(text)), MAX_RETRY_AFTER_S)
    try:
        when = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:  # RFC 9110 dates are GMT
        when = when.replace(tzinfo=timezone.utc)
    return min(max(0.0, (when - now).total_seconds()), MAX_RETRY_AFTER_S)


def unreachable(exc: BaseException) -> AnalyzerError:
    """The error for a request that got no answer: a timeout (connecting or reading) or
    anything else (refused, reset, TLS); both mean the analyzer is down."""
    message = f"analyzer unreachable ({describe(exc)})"
    # NewConnectionError subclasses ConnectTimeoutError in urllib3 2: a refusal is no timeout.
    if isinstance(exc, urllib3.exceptions.NewConnectionError):
        return AnalyzerDown(message)
    if isinstance(exc, (urllib3.exceptions.TimeoutError, TimeoutError)):
        return AnalyzerTimeout(message)
    return AnalyzerDown(message)


def describe(exc: BaseException) -> str:
    """``Type: message`` with any credential-bearing URL in the message hidden."""
    return scrub(f"{type(exc).__name__}: {exc}")
