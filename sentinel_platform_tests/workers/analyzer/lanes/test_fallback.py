"""When the fallback analyzer is asked, from a table of what the first one raised."""

from __future__ import annotations

import pytest

from sentinel_platform.schemas import Transaction
from sentinel_platform.streams.consumer.processor import Busy
from sentinel_platform_tests.workers.processors.test_transactions import BASE
from workers.analyzer import AnalyzerDown, AnalyzerError, AnalyzerExhausted, Assessment
from workers.analyzer.answers.replies import MessageRefused
from workers.analyzer.lanes.fallback import FallbackAnalyzer
from workers.analyzer.limits.fleet_limits import FleetHeld
from workers.processors.provisional import primary_unavailable

VERDICT = Assessment(True, "high", "second", "m2")


class Answers:
    """An analyzer answering ``outcome``: a verdict, or an exception raised."""

    def __init__(self, outcome: Assessment | Exception) -> None:
        self.outcome, self.calls = outcome, 0

    def assess_transaction(self, txn: Transaction) -> Assessment:
        self.calls += 1
        if isinstance(self.outcome, Exception):
            raise self.outcome
        return self.outcome

    def assess_axiom(self, axiom: object) -> Assessment:
        raise NotImplementedError


@pytest.mark.parametrize(
    ("first", "asks_second"),
    [
        (AnalyzerExhausted("insufficient_quota", None, "insufficient_quota"), True),
        (AnalyzerDown("refused"), True),
        (AnalyzerError("HTTP 500"), True),
        (Busy(1.0, "429"), False),
        (FleetHeld(1.0, "held"), False),
        (MessageRefused("too long"), False),
    ],
)
def test_the_second_is_asked_only_when_the_first_could_not_be(
    first: Exception, asks_second: bool
) -> None:
    assert primary_unavailable(first) is asks_second
    second = Answers(VERDICT)
    lane = FallbackAnalyzer(Answers(first), second, primary_unavailable)
    txn = Transaction.model_validate(BASE)
    if asks_second:
        assert lane.assess_transaction(txn) == Assessment(
            True, "high", "second", "m2", role="fallback"
        )
    else:
        with pytest.raises(type(first)):
            lane.assess_transaction(txn)
    assert second.calls == int(asks_second)


def test_the_first_decides_when_it_can() -> None:
    mine = Assessment(False, "low", "first", "m1")
    lane = FallbackAnalyzer(Answers(mine), Answers(VERDICT), primary_unavailable)
    assert lane.assess_transaction(Transaction.model_validate(BASE)).role == "primary"


@pytest.mark.parametrize(
    ("second", "raised"),
    [(AnalyzerDown("also down"), AnalyzerExhausted), (Busy(1.0, "busy"), Busy)],
)
def test_both_failing_the_first_error_goes_up_and_a_busy_second_waits(
    second: Exception, raised: type[Exception]
) -> None:
    first = AnalyzerExhausted("insufficient_quota", None, "insufficient_quota")
    lane = FallbackAnalyzer(Answers(first), Answers(second), primary_unavailable)
    with pytest.raises(raised):
        lane.assess_transaction(Transaction.model_validate(BASE))
