"""The AI's health on a stream, decided from its figures: tables of cases for the check's
verdict, the alerts and the words for what becomes of the messages under each
``SENTINEL_ANALYZER_WHEN_DOWN``."""

from __future__ import annotations

from typing import Any

import pytest

from sentinel_platform.domains.operations.ai_health import (
    AiFigures,
    fallback_fate,
    health_alerts,
    judge,
    message_fate,
)
from sentinel_platform.domains.operations.check_verdict import ERROR, WARN
from sentinel_platform.streams.backlog.provisional import NOTHING, ProvisionalBacklog
from sentinel_platform.streams.backlog.verdict_mix import summarise
from sentinel_platform.streams.operators import analyzer_holds as holds

RULES_FATE = "decided by the rules and marked provisional; they are re-screened"


@pytest.mark.parametrize(
    ("cause", "when_down", "says", "never"),
    [
        ("exhausted", "rules", RULES_FATE, "wait"),
        ("exhausted", "wait", "messages wait for the analyzer", "rules"),
        ("exhausted", "rules_unqueued", "re-screening is off", "wait"),
        ("down", "rules_unqueued", "rescreen_<stream>", "are re-screened"),
        ("down", "rules", RULES_FATE, "wait"),
        ("breaker_open", "wait", "messages wait for the analyzer", "rules"),
        ("retry_after", "rules", "a busy analyzer always means wait", "rules decide"),
        ("announced_limit", "rules", "a busy analyzer always means wait", "re-screened"),
        ("retry_after", "wait", "a busy analyzer always means wait", "rules decide"),
    ],
)
def test_what_becomes_of_the_messages_is_true_under_each_setting(
    cause: str, when_down: str, says: str, never: str
) -> None:
    fate = message_fate(cause, when_down)
    assert says in fate and never not in fate


@pytest.mark.parametrize(
    ("causes", "says"),
    [
        ({"down": 8, "exhausted": 2}, ["10 provisional: decided by the rules and re-screened"]),
        ({"refused": 3}, ["3 final: asking the model again would not help"]),
        ({"down": 1, "unusable": 2}, ["1 provisional", "2 final"]),
        ({"unknown": 4}, ["decided by the rules"]),
        # the batch lane's fallbacks are final, but not for the message's own reason
        ({"batch_expired": 4}, ["4 from the batch lane: final"]),
        ({"down": 1, "batch_errored": 2}, ["1 provisional", "2 from the batch lane: final"]),
    ],
)
def test_the_windows_fallbacks_are_told_provisional_or_final(
    causes: dict[str, int], says: list[str]
) -> None:
    text = fallback_fate(causes)
    assert all(part in text for part in says), text
    if not any(cause in ("refused", "unusable") for cause in causes):
        assert "would not help" not in text, text


def test_the_batch_lanes_fallbacks_are_named_for_what_the_provider_did() -> None:
    found = figures(
        drivers={"analyzer": 2, "fallback": 8}, causes={"batch_expired": 6, "batch_failed": 2}
    )
    summary = judge(found).description
    assert "expired at the provider 6" in summary, summary
    assert "batch_expired" not in summary, summary


def figures(
    drivers: dict[str, int] | None = None,
    causes: dict[str, int] | None = None,
    found: tuple[holds.Hold, ...] = (),
    provisional: ProvisionalBacklog = NOTHING,
    configured: bool = True,
    when_down: str = "rules",
) -> AiFigures:
    rows = [{"driver_used": d} for d, n in (drivers or {}).items() for _ in range(n)]
    return AiFigures(
        stream="transactions",
        mix=summarise(rows, 300, 300.0),
        fallback_causes=causes or {},
        holds=found,
        provisional=provisional,
        when_down=when_down,
        analyzer_configured=configured,
    )


def hold(cause: str) -> holds.Hold:
    return holds.Hold("gpt", "https://api.example.com/v1", cause, "HTTP 401", None, None)


PASS = "pass"


@pytest.mark.parametrize(
    ("case", "expected", "says"),
    [
        pytest.param(figures({"analyzer": 20}), PASS, "100% of 20 verdicts", id="all-model"),
        pytest.param(figures(), PASS, "no verdicts", id="quiet"),
        pytest.param(figures({"fallback": 4}), PASS, "0% of 4", id="too-few-to-judge"),
        pytest.param(figures({"analyzer": 18, "fallback": 2}, {"down": 2}), WARN, "10%", id="some"),
        pytest.param(
            figures({"analyzer": 4, "fallback": 16}, {"down": 16}), ERROR, "80%", id="most"
        ),
        pytest.param(
            figures({"analyzer": 9}, found=(hold("exhausted"),)), ERROR, "exhausted", id="spent"
        ),
        pytest.param(
            figures({"analyzer": 9}, found=(hold("retry_after"),)), WARN, "wait", id="held"
        ),
        pytest.param(
            figures({"analyzer": 9}, found=(hold("announced_limit"),)),
            PASS,
            "paces to the analyzer's announced budget",
            id="pacing",
        ),
        pytest.param(
            figures(provisional=ProvisionalBacklog(3, 1000.0)), WARN, "3 provisional", id="aged"
        ),
        pytest.param(figures(provisional=ProvisionalBacklog(3, 4000.0)), ERROR, "67 min", id="old"),
        pytest.param(
            figures(provisional=ProvisionalBacklog(1000, 5.0)), WARN, "1000", id="piled-up"
        ),
        pytest.param(
            figures(provisional=ProvisionalBacklog(7, 30.0)), PASS, "7 provisional", id="fresh"
        ),
        pytest.param(
            figures({"rules": 50}, found=(hold("exhausted"),), configured=False),
            PASS,
            "no analyzer configured",
            id="rules-only",
        ),
    ],
)
def test_the_check_fails_at_its_thresholds_with_every_figure(
    case: AiFigures, expected: Any, says: str
) -> None:
    verdict = judge(case)
    assert (PASS if verdict.passed else verdict.severity) == expected, verdict.description
    assert says in verdict.description
    meta = verdict.metadata
    assert meta["verdicts"] == case.mix.verdicts and meta["when_down"] == "rules"
    assert meta["provisional_waiting"] == case.provisional.waiting
    assert meta["exhausted"] is bool(case.exhausted)


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        (figures({"analyzer": 20}), []),
        (figures({"analyzer": 18, "fallback": 2}, {"down": 2}), [("fallback_share", "warning")]),
        (figures({"fallback": 20}, {"down": 20}), [("fallback_share", "error")]),
        (figures(provisional=ProvisionalBacklog(2, 5000.0)), [("provisional_backlog", "error")]),
        (figures({"analyzer": 9}, found=(hold("exhausted"),)), []),  # per hold, not per stream
        (figures({"fallback": 20}, configured=False), []),
    ],
)
def test_the_streams_alerts(case: AiFigures, expected: list[tuple[str, str]]) -> None:
    alerts = health_alerts(case, "ai_health_sensor")
    assert [(a.condition, a.severity) for a in alerts] == expected
    assert all(a.stream == "transactions" for a in alerts)
