"""One worker's view of the analyzer's health (:class:`workers.analyzer.health.Health`):
one line per change, and a success recovers only a call sent after the latest exhaustion.

Each case is what the worker's calls reported, in order: ``(state, epoch)`` where epoch
says when the reporting call was sent ("before": before the exhaustion reported earlier,
"after": once it was known, None: not a success); then the events logged and the state.
"""

from __future__ import annotations

import logging

import pytest

from workers.analyzer.health import Health

Report = tuple[str, str | None]

CASES: list[tuple[str, list[Report], list[str], str]] = [
    ("told once", [("exhausted", None)], ["analyzer_exhausted"], "exhausted"),
    (
        "held messages after it: no further line",
        [("exhausted", None), ("exhausted", None), ("exhausted", None)],
        ["analyzer_exhausted"],
        "exhausted",
    ),
    (
        "a late answer of a call sent before it: ignored",
        [("exhausted", None), ("healthy", "before"), ("exhausted", None)],
        ["analyzer_exhausted"],
        "exhausted",
    ),
    (
        "a success of a call sent after it (a release): recovered",
        [("exhausted", None), ("healthy", "after")],
        ["analyzer_exhausted", "analyzer_recovered"],
        "healthy",
    ),
    (
        "busy then a success: recovered",
        [("busy", None), ("healthy", "after")],
        ["analyzer_busy", "analyzer_recovered"],
        "healthy",
    ),
]


@pytest.mark.parametrize(
    ("reports", "logged", "final"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_health_logs_each_change_once_and_ignores_late_answers(
    reports: list[Report], logged: list[str], final: str, caplog: pytest.LogCaptureFixture
) -> None:
    health = Health({"analyzer": "http://127.0.0.1:1/v1"})
    before = health.epoch  # a call sent before anything was reported
    with caplog.at_level(logging.INFO, logger="workers.analyzer.client"):
        for state, sent in reports:
            epoch = {"before": before, "after": health.epoch, None: None}[sent]
            health.now(state, "why", "insufficient_quota", epoch=epoch)
    assert [r.getMessage() for r in caplog.records] == logged
    assert health.state == final
