"""What a batch message without a verdict comes to, by SENTINEL_ANALYZER_WHEN_DOWN (pure),
and a batch verdict's result: the real-time verdict's fields plus ``lane=batch``."""

from __future__ import annotations

from typing import get_args

import pytest

from sentinel_platform.schemas import DEMO_FIELD, DEMO_VALUE, Transaction
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.provisional import FallbackCause, is_provisional_cause
from sentinel_platform.streams.consumer.outcomes import Commit, DeadLetterOp
from sentinel_platform_tests.workers.processors.test_axioms import make_axiom
from sentinel_platform_tests.workers.processors.test_transactions import make_txn
from workers.analyzer.answers.replies import Assessment, Usage
from workers.batchlane.verdicts import BatchVerdicts, Entry, Requeue, Undecided, route
from workers.processors.axioms import AxiomProcessor
from workers.processors.transactions import TransactionProcessor


@pytest.mark.parametrize(
    ("why", "when_down", "expected"),
    [
        ("errored", "rules", "rules"),
        ("expired", "rules", "rules"),
        ("canceled", "rules", "rules"),
        ("unanswered", "rules", "rules"),
        ("failed", "rules", "rules"),
        ("refused", "rules", "rules"),
        ("errored", "wait", "dead_letter"),  # asked again, the provider would repeat it
        ("expired", "wait", "requeue"),
        ("canceled", "wait", "requeue"),
        ("unanswered", "wait", "requeue"),
        ("failed", "wait", "requeue"),
        ("refused", "wait", "requeue"),
        ("held", "rules", "requeue"),  # the provider's queue was full: nothing of theirs
        ("held", "wait", "requeue"),
    ],
)
def test_where_a_message_without_a_verdict_goes(
    why: Undecided, when_down: str, expected: str
) -> None:
    assert route(why, when_down) == expected


def test_every_reason_has_a_route() -> None:
    for why in get_args(Undecided):
        for when_down in ("rules", "wait"):
            assert route(why, when_down) in ("rules", "requeue", "dead_letter")


def test_every_fallback_the_lane_makes_is_a_cause_of_the_contract(
    rules_settings: Settings,
) -> None:
    made = [
        lane(rules_settings).undecided(entry(), why)
        for why in get_args(Undecided)
        if route(why, "rules") == "rules"
    ]
    causes = {m.effect.result["fallback_cause"] for m in made if isinstance(m, Commit)}
    assert causes and causes <= set(get_args(FallbackCause)), causes
    assert not any(is_provisional_cause(cause) for cause in causes)


def lane(settings: Settings, when_down: str = "rules") -> BatchVerdicts:
    live = TransactionProcessor(settings, analyzer=None)
    return BatchVerdicts(live, when_down)


def entry() -> Entry:
    txn = make_txn(id="t-1")
    return Entry("1-0", txn.to_fields(), txn)


def test_a_batch_verdict_is_the_real_time_one_plus_its_lane(rules_settings: Settings) -> None:
    usage = Usage(1000, 40, 0)
    assessment = Assessment(True, "high", "a pattern", "gpt-4o-mini", "v1", usage)
    made = lane(rules_settings).verdict(entry(), assessment)
    assert isinstance(made, Commit)
    result = made.effect.result
    assert result["lane"] == "batch" and result["driver_used"] == "analyzer"
    assert result["is_threat"] == "true" and result["narrative"] == "a pattern"
    assert (result["model"], result["input_tokens"]) == ("gpt-4o-mini", "1000")
    assert result["rules_risk_level"] and result["day"] == "2026-11-21"
    assert made.effect.recent is None  # the recent feed keeps to live verdicts
    assert made.natural_key == "t-1" and made.delivery.id == "1-0"


def test_an_expired_request_is_a_final_rules_fallback_saying_why(
    rules_settings: Settings,
) -> None:
    made = lane(rules_settings).undecided(entry(), "errored", Usage(900, 12))
    assert isinstance(made, Commit)
    result = made.effect.result
    assert (result["driver_used"], result["fallback_cause"], result["lane"]) == (
        "fallback",
        "batch_errored",
        "batch",
    )
    assert result["input_tokens"] == "900"  # billed, so counted
    assert "provisional" not in result and made.effect.provisional is None


def test_under_wait_it_goes_back_or_to_the_dlq(rules_settings: Settings) -> None:
    verdicts = lane(rules_settings, "wait")
    assert isinstance(verdicts.undecided(entry(), "expired"), Requeue)
    dead = verdicts.undecided(entry(), "errored")
    assert isinstance(dead, DeadLetterOp) and dead.reason == "unprocessable"


def test_a_message_decided_without_the_model_is_never_sent(rules_settings: Settings) -> None:
    txn = make_txn(id="t-demo")
    demo = Transaction.from_fields({**txn.to_fields(), DEMO_FIELD: DEMO_VALUE})
    decided = lane(rules_settings).unasked(Entry("2-0", demo.to_fields(), demo))
    assert isinstance(decided, Commit) and decided.effect.result["driver_used"] == "rules"
    assert lane(rules_settings).unasked(entry()) is None  # the model is asked: batched
    axioms = BatchVerdicts(AxiomProcessor(rules_settings, analyzer=None), "rules")
    quiet = make_axiom(anomaly_score="0.1")  # below the audit threshold
    below = axioms.unasked(Entry("3-0", quiet.to_fields(), quiet))
    assert isinstance(below, Commit) and below.effect.result["routed_to_ai"] == "false"
    audited = make_axiom(anomaly_score="0.99")
    assert axioms.unasked(Entry("4-0", audited.to_fields(), audited)) is None


def test_an_axiom_without_a_batch_verdict_is_the_processors_own_fallback(
    rules_settings: Settings,
) -> None:
    axioms = BatchVerdicts(AxiomProcessor(rules_settings, analyzer=None), "rules")
    audited = make_axiom(anomaly_score="0.99")
    made = axioms.undecided(Entry("4-0", audited.to_fields(), audited), "expired")
    assert isinstance(made, Commit)
    result = made.effect.result
    assert (result["risk_level"], result["fallback_cause"]) == ("high", "batch_expired")
    assert "provisional" not in result and made.effect.provisional is None
