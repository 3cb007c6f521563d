"""Why the rules decided, and whether the verdict waits for the model: tables of cases."""

from __future__ import annotations

import pytest

from sentinel_platform.streams.backlog.provisional import day_of
from sentinel_platform.streams.consumer.processor import Busy, Unprocessable
from workers.analyzer import (
    AnalyzerDown,
    AnalyzerError,
    AnalyzerExhausted,
    AnalyzerTimeout,
    CircuitOpenError,
    UnusableAnswer,
    Usage,
)
from workers.analyzer.answers.replies import MessageRefused
from workers.analyzer.limits.fleet_limits import FleetExhausted, FleetHeld
from workers.processors.provisional import (
    AnalyzerAway,
    fallback,
    fallback_cause,
    model_only_error,
)


@pytest.mark.parametrize(
    ("error", "cause"),
    [
        (AnalyzerDown("connection refused"), "down"),
        (AnalyzerTimeout("no answer within 5s"), "down"),
        (AnalyzerError("reply is not JSON"), "down"),
        (RuntimeError("anything else"), "down"),
        (CircuitOpenError("circuit open"), "breaker_open"),
        (AnalyzerExhausted("quota", None, "insufficient_quota"), "exhausted"),
        (AnalyzerExhausted("key", None, "rejected_key"), "exhausted"),
        (AnalyzerExhausted("budget", 3600.0, "daily_tokens"), "over_budget"),
        (FleetExhausted(30.0, "daily_tokens: daily token budget spent"), "over_budget"),
        (FleetExhausted(30.0, "insufficient_quota: You exceeded your quota"), "exhausted"),
        (FleetHeld(2.0, "analyzer a held for 2.00s (retry_after)"), "held"),
        (MessageRefused("does not fit the context"), "refused"),
        (UnusableAnswer("verdict cut at max tokens", Usage(1, 1), None), "unusable"),
    ],
)
def test_the_fallback_cause_is_read_from_what_the_analyzer_raised(
    error: BaseException, cause: str
) -> None:
    assert fallback_cause(error) == cause


@pytest.mark.parametrize(
    ("stamp", "day"),
    [
        ("2026-11-21T10:00:00Z", "2026-11-21"),
        ("2026-11-21T23:30:00-02:00", "2026-11-22"),  # the UTC day, not the local one
        ("2026-11-21T00:15:00+01:00", "2026-11-20"),
        ("2026-11-21T10:00:00", "2026-11-21"),  # no offset: UTC
        ("2026-11-21T10:00:00.123456+00:00", "2026-11-21"),
    ],
)
def test_the_day_is_the_utc_day_of_the_data(stamp: str, day: str) -> None:
    assert day_of(stamp) == day


WIRE = {"data": '{"id": "t-1"}'}


@pytest.mark.parametrize(
    ("cause", "wire", "fields", "queued"),
    [
        ("down", WIRE, {"fallback_cause": "down", "provisional": "true"}, True),
        ("breaker_open", WIRE, {"fallback_cause": "breaker_open", "provisional": "true"}, True),
        ("held", WIRE, {"fallback_cause": "held", "provisional": "true"}, True),
        ("exhausted", WIRE, {"fallback_cause": "exhausted", "provisional": "true"}, True),
        ("over_budget", WIRE, {"fallback_cause": "over_budget", "provisional": "true"}, True),
        ("down", None, {"fallback_cause": "down", "provisional": "true"}, False),  # off
        ("refused", WIRE, {"fallback_cause": "refused"}, False),
        ("unusable", WIRE, {"fallback_cause": "unusable"}, False),
    ],
)
def test_a_fallback_for_the_analyzers_cause_is_provisional_and_queued_unless_off(
    cause: str, wire: dict[str, str] | None, fields: dict[str, str], queued: bool
) -> None:
    made = fallback(cause, "2026-11-21", wire)  # type: ignore[arg-type]
    assert made.fields == fields
    expected = {**WIRE, "sentinel_cause": cause, "sentinel_day": "2026-11-21"}
    assert made.queue == (expected if queued else None)


@pytest.mark.parametrize(
    ("cause", "raised"),
    [
        ("down", AnalyzerAway),
        ("breaker_open", AnalyzerAway),
        ("held", AnalyzerAway),
        ("exhausted", AnalyzerAway),
        ("over_budget", AnalyzerAway),
        ("refused", Unprocessable),
        ("unusable", Unprocessable),
    ],
)
def test_a_re_screen_waits_while_the_analyzer_cannot_be_asked_and_never_falls_back(
    cause: str, raised: type[Exception]
) -> None:
    error = model_only_error(cause, AnalyzerDown("refused"))  # type: ignore[arg-type]
    assert type(error) is raised
    if isinstance(error, Busy):
        assert error.sent is False  # says nothing of the analyzer's capacity
