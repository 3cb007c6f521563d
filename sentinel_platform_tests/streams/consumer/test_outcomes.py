"""Which finished calls are latency samples of the in-flight limit (``is_sample``)."""

from __future__ import annotations

import pytest

from sentinel_platform.streams.consumer.outcomes import (
    Commit,
    DeadLetterOp,
    Delivery,
    Failure,
    Outcome,
    is_sample,
)
from sentinel_platform.streams.consumer.processor import Effect

DELIVERY = Delivery("1-0", {}, 1)


def commit(sample: bool) -> Commit:
    return Commit(DELIVERY, "k", Effect("k", {"v": "1"}, sample=sample))


@pytest.mark.parametrize(
    ("outcome", "sample"),
    [
        (commit(True), True),  # the downstream answered: its latency
        (commit(False), False),  # a rules fallback: the downstream was not timed
        (Failure(DELIVERY, "boom"), True),  # an error that is not a drop (the contract)
        (DeadLetterOp(DELIVERY, "invalid_message", "bad"), True),
    ],
    ids=["answered", "fallback", "failure", "dead-letter"],
)
def test_only_commits_that_timed_their_downstream_and_errors_are_samples(
    outcome: Outcome, sample: bool
) -> None:
    assert is_sample(outcome) is sample


def test_an_effect_is_a_sample_unless_it_says_otherwise() -> None:
    assert Effect("k", {"v": "1"}).sample is True
