"""The decision the status follows: most recent verdicts were rules fallbacks."""

from __future__ import annotations

import pytest

from sentinel_platform.streams.backlog.verdict_mix import mostly_fallback, summarise

CASES = [
    # (analyzer, fallback, rules, mostly fallback?)
    (0, 0, 0, False),  # nothing committed
    (0, 4, 0, False),  # too few verdicts to judge
    (0, 5, 0, True),
    (5, 5, 0, False),  # half is not most
    (4, 5, 0, True),
    (1, 3, 6, False),  # rules verdicts (no analyzer) count in the whole
    (0, 6, 4, True),
]


@pytest.mark.parametrize(("analyzer", "fallback", "rules", "expected"), CASES)
def test_mostly_fallback(analyzer: int, fallback: int, rules: int, expected: bool) -> None:
    by_driver = {"analyzer": analyzer, "fallback": fallback, "rules": rules}
    assert mostly_fallback(by_driver) is expected


def test_summarise_counts_tokens_per_minute_and_ignores_unreadable_counts() -> None:
    rows = [
        {"driver_used": "analyzer", "input_tokens": "100", "output_tokens": "20", "model": "m"},
        {"driver_used": "analyzer", "input_tokens": "bad", "output_tokens": "-3"},
        {"driver_used": "fallback"},
    ]
    mix = summarise(rows, 300, 120.0)
    assert mix.by_driver == {"analyzer": 2, "fallback": 1, "rules": 0}
    assert (mix.input_tokens_per_min, mix.output_tokens_per_min) == (50.0, 10.0)
    assert (mix.ai_share, mix.models) == (0.667, ["m"])


def test_summarise_leaves_the_demos_verdicts_out() -> None:
    """The demo's results carry its mark (``demo=1``): a user's figures never count them."""
    rows = [
        {"driver_used": "rules", "demo": "1"},
        {"driver_used": "fallback", "demo": "1", "input_tokens": "100", "model": "demo-m"},
        {"driver_used": "analyzer", "input_tokens": "60", "model": "m"},
        {"driver_used": "fallback", "demo": "0"},  # not the mark: the user's own
    ]
    mix = summarise(rows, 300, 60.0)
    assert mix.verdicts == 2
    assert mix.by_driver == {"analyzer": 1, "fallback": 1, "rules": 0}
    assert (mix.input_tokens_per_min, mix.models) == (60.0, ["m"])
