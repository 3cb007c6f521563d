"""What an answer's status and headers mean, and the wait they give, as the SDKs read them.

The decision table of every answer that is not an exhaustion (those are matched on the
provider's documented cause first, by :func:`workers.analyzer.answers.refusals.refusal`): one pure
function, :func:`read_answer`, of the API's kind, the status and the headers, checked row
by row against the official ``openai`` and ``anthropic`` packages' own retry decisions.

* 408, 409 (a gateway's request timeout, a lock timeout), any API: busy, with the
  headers' wait, or none given and bounded;
* 429 (not an exhaustion), any API: busy, with the headers' wait or none given (never
  bounded: a rate limiter is alive);
* 503 and 529 under ``openai`` and ``anthropic``: busy, with the headers' wait or none
  given; with none, bounded (:class:`BusyOrDead`: down past
  :data:`~workers.analyzer.answers.busy_spell.BUSY_BOUND_S` of nothing else);
* 503 under ``sentinel``: busy with a valid ``Retry-After`` (0 or a past date: none given,
  bounded), else down, as its contract says; its 529 is down;
* 500, 502, 504, Cloudflare's 520-524 and every other 5xx: down;
* ``x-should-retry: false`` (the SDKs' own header) on any answer the table reads: wrong;
  ``x-should-retry: true`` on a 4xx: busy, bounded when no wait is given;
* every other answer (4xx, 1xx, 3xx): wrong.

**The wait** (:func:`header_wait_s`) is read from ``retry-after-ms`` (OpenAI's and Azure's
milliseconds), then ``Retry-After`` (seconds or an HTTP date), then a Google
``RetryInfo.retryDelay`` in the body. A wait of 0, or a date already past, is **no wait
given**, as the SDKs read it: they use a header's wait only when it is above 0 and fall
back to their own backoff otherwise; read as "call again now" it would be a storm.
Where one header gives 0 and a later one a real wait (Azure's ``retry-after-ms: 0`` beside
``Retry-After: 10``), the real wait is kept, deliberately unlike the SDKs (which stop at the
first header they can parse): the server said when it will serve, and calling again after
half a second only earns the same refusal. No wait given means the caller's backoff with
jitter (:func:`~workers.analyzer.answers.busy_spell.backoff_s`), shared by the fleet as a hold.

**Why 408 and 409 are busy, not wrong.** A 408 is a gateway or server giving up on a
request in time, a 409 the SDKs' "lock timeout": neither says the request is wrong, and
both SDKs retry them. They count towards the busy bound, so a gateway answering nothing
else for long is found down like a dead upstream.

**Why 502, 504 and Cloudflare's 520-524 are down, not busy.** They say the server behind
the proxy did not answer (refused, reset, timed out): the same as this client's own
"unreachable" and timeout, so the breaker counts them and ``SENTINEL_ANALYZER_WHEN_DOWN``
decides, at once. A 503 is ambiguous: a self-hosted server's full queue (Ollama, vLLM) and
a proxy with no healthy upstream (Envoy) both answer it; it is busy until the busy bound
tells them apart (:class:`BusyOrDead`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from workers.analyzer.answers.replies import (
    MAX_RETRY_AFTER_S,
    AnalyzerBusy,
    AnalyzerDown,
    AnalyzerError,
    retry_after_seconds,
)

ApiKind = Literal["sentinel", "openai", "anthropic"]
Meaning = Literal["busy", "wrong", "down"]
#: Busy under every API: a request timeout, a lock timeout, a rate limit.
BUSY_STATUSES = frozenset((408, 409, 429))
#: Busy under the model APIs whatever their headers (a full queue, Anthropic's overload);
#: without a wait, bounded (:class:`BusyOrDead`).
MODEL_BUSY_STATUSES = frozenset((503, 529))
#: The SDKs' own header: ``true`` retries any answer, ``false`` none.
SHOULD_RETRY = "x-should-retry"


class BusyOrDead(AnalyzerBusy):
    """A busy answer that gave no wait and is no rate limiter's 429 (a 408, 409, 503,
    529, ``x-should-retry: true``): a server at capacity answers it, and so does a proxy
    in front of a dead one. Only how long it lasts tells them apart, so these answers
    count towards the busy bound (:class:`~workers.analyzer.answers.busy_spell.BusySpell`)."""


@dataclass(frozen=True)
class Reading:
    """What an answer means; for busy, the wait it gives (None: no wait given)."""

    meaning: Meaning
    wait_s: float | None = None
    #: busy with no wait and no 429: counts towards the busy bound (:class:`BusyOrDead`)
    bounded: bool = False
    #: why, where the status alone does not say it (``x-should-retry: false``)
    note: str = ""


def read_answer(
    api: ApiKind,
    status: int,
    headers: Mapping[str, str],
    now: datetime,
    retry_delay_s: float | None = None,
) -> Reading:
    """The table row of a non-2xx answer that is neither an exhaustion nor a refused
    request. ``headers`` are lower-cased; ``now`` is an aware UTC time (HTTP dates);
    ``retry_delay_s`` a wait the body gives (Google's ``RetryInfo``)."""
    should_retry = headers.get(SHOULD_RETRY, "").strip().lower()
    if should_retry == "false":
        return Reading("wrong", note=f"{SHOULD_RETRY}: false")
    wait = header_wait_s(headers, now, retry_delay_s)
    if status in BUSY_STATUSES or (status in MODEL_BUSY_STATUSES and api != "sentinel"):
        return Reading("busy", wait, bounded=wait is None and status != 429)
    if status == 503 and _has_retry_after(headers, now):  # sentinel: busy as it says
        return Reading("busy", wait, bounded=wait is None)
    if 500 <= status < 600:
        return Reading("down")
    if should_retry == "true":
        return Reading("busy", wait, bounded=wait is None, note=f"{SHOULD_RETRY}: true")
    return Reading("wrong")


def answer_error(reading: Reading, said: str) -> AnalyzerError | AnalyzerBusy:
    """The error the caller raises for ``reading``; ``said`` describes the answer
    (``analyzer answered HTTP 503 ...``)."""
    note = f" ({reading.note})" if reading.note else ""
    if reading.meaning == "busy":
        wait = "" if reading.wait_s is None else f", wait {reading.wait_s:g}s"
        kind = BusyOrDead if reading.bounded else AnalyzerBusy
        return kind(reading.wait_s, f"{said}{note}{wait}")
    if reading.meaning == "down":
        return AnalyzerDown(said)
    return AnalyzerError(f"{said}{note} (the request was refused: not retried)")


def header_wait_s(
    headers: Mapping[str, str], now: datetime, retry_delay_s: float | None = None
) -> float | None:
    """Seconds an answer asks to wait, at most ``MAX_RETRY_AFTER_S``: the first of
    ``retry-after-ms``, ``Retry-After`` and ``retry_delay_s`` that gives a wait above 0.
    None (no wait given) when none does: absent, invalid, 0 or a date already past."""
    millis = _number(headers.get("retry-after-ms"))
    waits = (
        None if millis is None else millis / 1000,
        retry_after_seconds(headers.get("retry-after"), now),
        retry_delay_s,
    )
    for wait in waits:
        if wait is not None and wait > 0:
            return min(wait, MAX_RETRY_AFTER_S)
    return None


def _has_retry_after(headers: Mapping[str, str], now: datetime) -> bool:
    """A valid ``Retry-After``, 0 or a past date included: the ``sentinel`` contract's
    503 is busy when it carries one, whatever the wait."""
    return retry_after_seconds(headers.get("retry-after"), now) is not None


def _number(value: str | None) -> float | None:
    try:
        number = float((value or "").strip())
    except ValueError:
        return None
    return number if number >= 0 and math.isfinite(number) else None
