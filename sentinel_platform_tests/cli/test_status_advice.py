"""When the analyzer's capacity limits a stream's drain, ``sentinel status`` names it
instead of leaving the operator to add workers
(:func:`~sentinel_platform.cli.status_advice.drain_advice`)."""

from __future__ import annotations

from typing import Any

import pytest

from sentinel_platform.cli.status_advice import NO_HELP, AnalyzerSetup, drain_advice
from sentinel_platform_tests.cli.test_status_causes import BUSY, DAILY, KEY, QUOTA

RULES = AnalyzerSetup(configured=True, when_down="rules")
WAIT = AnalyzerSetup(configured=True, when_down="wait")
CAPPED = AnalyzerSetup(configured=True, when_down="rules", rate_limit=2.0)
NONE = AnalyzerSetup(configured=False)


def _stream(
    zone: str = "backpressure",
    rate: float | None = 0.0,
    verdicts: int = 0,
    ai_share: float | None = None,
    lag: int = 500,
) -> dict[str, Any]:
    mix = {"verdicts": verdicts, "ai_share": ai_share, "models": ["qwen2.5-0.5b"]}
    return {
        "zone": zone,
        "lag": lag,
        "drain_rate_per_s": rate,
        "in_flight_allowance": 4,
        "verdicts": mix,
    }


CASES = [
    # (stream, holds, setup, the words expected in the advice; None: no advice)
    (_stream(zone="nominal"), [BUSY], WAIT, None),  # keeping up: nothing to say
    (_stream(zone="worker_off"), [BUSY], WAIT, None),  # no worker: not the analyzer
    (_stream(), [BUSY], RULES, "gpt-eu is held (retry_after, 3600 s left)"),  # busy: waits
    (_stream(), [DAILY], WAIT, "SENTINEL_ANALYZER_DAILY_TOKENS) refills at midnight"),
    (_stream(), [QUOTA], WAIT, "gpt-eu is held (exhausted"),
    (_stream(), [DAILY], RULES, None),  # exhausted under rules: the rules decide, no wait
    (_stream(), [KEY], WAIT, "down or answers nothing"),  # a key's hold: not the analyzer's
    (_stream(), [], WAIT, "it is down or answers nothing"),
    (_stream(lag=0, zone="elevated"), [], WAIT, None),  # nothing waits for it
    (_stream(verdicts=40, ai_share=0.1, rate=8.0), [], WAIT, None),  # the rules decide: workers
    (_stream(), [], RULES, None),  # rules mode: a down analyzer does not stop the drain
    (_stream(), [], NONE, None),  # no analyzer configured
    (_stream(rate=1.9, verdicts=40, ai_share=1.0), [], CAPPED, "SENTINEL_ANALYZER_RATE_LIMIT=2"),
    (_stream(rate=0.8, verdicts=40, ai_share=0.9), [], RULES, "0.8 rows/s, most decided by"),
    (_stream(rate=0.8, verdicts=40, ai_share=0.9), [], CAPPED, "--parallel"),  # not at the cap
    (_stream(rate=8.0, verdicts=40, ai_share=0.5), [], RULES, None),  # half is not most
]


@pytest.mark.parametrize(("stream", "holds", "setup", "expected"), CASES)
def test_drain_advice(
    stream: dict[str, Any], holds: list[dict[str, Any]], setup: AnalyzerSetup, expected: str | None
) -> None:
    advice = drain_advice(stream, holds, setup)
    if expected is None:
        assert advice is None
    else:
        assert advice is not None and expected in advice, advice
        assert advice.startswith("the analyzer")


def test_held_advice_says_workers_cannot_help() -> None:
    advice = drain_advice(_stream(), [BUSY], WAIT)
    assert advice is not None and NO_HELP in advice
