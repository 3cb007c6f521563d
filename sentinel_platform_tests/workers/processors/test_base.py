"""Which verdicts time the analyzer: the latency samples of the in-flight limit."""

from __future__ import annotations

import pytest

from workers.processors.base import is_latency_sample


@pytest.mark.parametrize(
    ("driver", "with_analyzer", "sample"),
    [
        ("analyzer", True, True),  # its answer: the analyzer's latency
        ("fallback", True, False),  # down or breaker open: the rules, in a millisecond
        ("rules", True, False),  # not asked (an axiom below the audit threshold)
        ("rules", False, True),  # no analyzer: the rules' own time is the call
    ],
)
def test_only_the_analyzers_answers_are_samples_when_there_is_one(
    driver: str, with_analyzer: bool, sample: bool
) -> None:
    assert is_latency_sample(driver, with_analyzer) is sample
