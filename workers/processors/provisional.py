"""Why the rules decided a message, and whether that verdict waits for the model.

A processor that falls back to its rules (the analyzer failed) records why, as the
result's ``fallback_cause`` (:func:`fallback_cause`, read from the analyzer's exception),
and, for a cause that says the analyzer could not be asked (down, its breaker open, the
fleet held, the provider exhausted, the daily budget spent), marks the verdict
``provisional`` and hands the consumer the message's re-screen queue entry with it
(:func:`fallback`; the contract: :mod:`sentinel_platform.streams.backlog.provisional`).
A cause of the message's own (the model refused it, or billed an answer that was no
verdict) is final: asked again, the model would do the same.

Re-screening asks the model only: where a live message would fall back, a queued one
waits (:class:`AnalyzerAway`, a :class:`Busy` the consumer parks) or, for a final
cause, is dead-lettered (:class:`Unprocessable`), so a message never gets a second rules
verdict (:func:`model_only_error`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from sentinel_platform.schemas import describe_error
from sentinel_platform.streams.backlog.provisional import (
    FALLBACK_CAUSE,
    PROVISIONAL,
    QUEUE_CAUSE,
    QUEUE_DAY,
    FallbackCause,
    is_provisional_cause,
)
from sentinel_platform.streams.consumer.processor import Busy, Unprocessable
from workers.analyzer import AnalyzerExhausted, CircuitOpenError, UnusableAnswer
from workers.analyzer.answers.replies import MessageRefused
from workers.analyzer.limits.fleet_limits import FleetExhausted, FleetHeld

#: The cause of an :class:`AnalyzerExhausted` for the fleet's own daily token budget
#: (``SENTINEL_ANALYZER_DAILY_TOKENS``), as ``TokenBudget`` raises it; a hold set for it
#: names it first in its reason.
DAILY_BUDGET = "daily_tokens"


def fallback_cause(exc: BaseException) -> FallbackCause:
    """Why the analyzer gave no verdict, from what it raised: ``refused`` (the message
    does not fit the model), ``unusable`` (an answer billed without a verdict),
    ``breaker_open`` (not sent: the breaker is open), ``over_budget`` (the daily token
    budget spent), ``exhausted`` (a quota, a spend limit, a rejected key), ``held`` (the
    fleet held), else ``down`` (refused, reset, timed out, an error answer)."""
    if isinstance(exc, MessageRefused):
        return "refused"
    if isinstance(exc, UnusableAnswer):
        return "unusable"
    if isinstance(exc, CircuitOpenError):
        return "breaker_open"
    if isinstance(exc, AnalyzerExhausted):
        return "over_budget" if exc.cause == DAILY_BUDGET else "exhausted"
    if isinstance(exc, FleetExhausted):
        return "over_budget" if exc.reason.startswith(f"{DAILY_BUDGET}:") else "exhausted"
    if isinstance(exc, FleetHeld):
        return "held"
    return "down"


def primary_unavailable(exc: BaseException) -> bool:
    """The live analyzer could not be asked (a cause a rules verdict would call
    provisional: exhausted, held until released, down, its breaker open), so a fallback
    analyzer is (:class:`~workers.analyzer.lanes.fallback.FallbackAnalyzer`): never for
    :class:`Busy`, which waits for the live one."""
    return not isinstance(exc, Busy) and is_provisional_cause(fallback_cause(exc))


@dataclass(frozen=True)
class Fallback:
    """A rules fallback: the result's fields that say why (and whether it is
    provisional), and its re-screen queue entry (None: not queued)."""

    cause: FallbackCause
    fields: dict[str, str] = field(default_factory=dict)
    queue: Mapping[str, str] | None = None


def fallback(cause: FallbackCause, day: str, wire_fields: Mapping[str, str] | None) -> Fallback:
    """The fallback of ``cause`` for a message of ``day``: provisional for a cause of
    the analyzer's, queued with ``wire_fields`` (the message as its stream carries it)
    unless those are None (re-screening is off)."""
    fields: dict[str, str] = {FALLBACK_CAUSE: cause}
    if not is_provisional_cause(cause):
        return Fallback(cause, fields)
    fields[PROVISIONAL] = "true"
    if wire_fields is None:
        return Fallback(cause, fields)
    return Fallback(cause, fields, {**wire_fields, QUEUE_CAUSE: cause, QUEUE_DAY: day})


class AnalyzerAway(Busy):
    """Re-screening: the analyzer could not be asked, so the queued message waits for it.
    Nothing reached it that says anything of its capacity (``sent`` False)."""

    sent = False


def model_only_error(cause: FallbackCause, exc: BaseException) -> Exception:
    """What a re-screen raises where a live message would fall back: the message waits
    (:class:`AnalyzerAway`) while the analyzer cannot be asked, and is dead-lettered
    (:class:`Unprocessable`) for a cause of its own, which asking again cannot change."""
    if is_provisional_cause(cause):
        return AnalyzerAway(
            None, f"re-screen waits for the analyzer ({cause}): {describe_error(exc)}"
        )
    return Unprocessable(f"re-screen: the model gave no verdict ({cause}): {describe_error(exc)}")
