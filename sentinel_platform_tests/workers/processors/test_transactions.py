"""The AML rule table: each rule moves the score, level and verdict exactly as documented."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest

from sentinel_platform.schemas import SchemaError, Transaction
from sentinel_platform.settings import Settings
from sentinel_platform_tests.harness.analyzer_server import AnalyzerServer
from sentinel_platform_tests.harness.model_api_bodies import OPENAI_MODEL
from sentinel_platform_tests.harness.model_api_server import ModelApiServer
from sentinel_platform_tests.harness.model_lanes import TRANSACTION
from workers.analyzer import Assessment, HttpAnalyzer, Usage
from workers.analyzer.apis.openai_api import OpenAiApi
from workers.analyzer.prompts import load_prompt
from workers.processors import TransactionProcessor, transactions
from workers.processors.transactions import RULES, evaluate_rules

BASE: dict[str, Any] = {"id": "txn-1", **TRANSACTION}


def make_txn(**overrides: Any) -> Transaction:
    return Transaction.from_fields({"data": json.dumps({**BASE, **overrides})})


def test_plain_grocery_purchase_is_low_risk_and_no_threat(rules_settings: Settings) -> None:
    verdict = evaluate_rules(make_txn(), rules_settings)
    assert (verdict.score, verdict.fired, verdict.risk_level, verdict.is_threat) == (
        0,
        (),
        "low",
        False,
    )


@pytest.mark.parametrize(
    ("overrides", "rule", "level"),
    [
        ({"amount": 400.01}, "above_high_risk_amount", "high"),
        ({"category": "suspicious", "merchant": "RapidRemit"}, "suspicious_category", "high"),
        ({"category": "forex", "amount": 250.55}, "large_forex", "medium"),
        ({"message": "URGENT: pay now"}, "threat_keyword", "medium"),
        ({"message": "buy a Gift Card for me"}, "threat_keyword", "medium"),
        ({"message": "send via crypto wallet"}, "threat_keyword", "medium"),
        ({"message": "wire the money"}, "threat_keyword", "medium"),
        ({"amount": 300}, "round_amount", "low"),
    ],
)
def test_each_rule_alone_sets_its_documented_level(
    rules_settings: Settings, overrides: dict[str, Any], rule: str, level: str
) -> None:
    verdict = evaluate_rules(make_txn(**overrides), rules_settings)
    assert verdict.fired == (rule,)
    assert verdict.risk_level == level
    assert verdict.is_threat is (level == "high")


def test_amount_exactly_at_high_risk_amount_is_not_flagged(
    make_rules_settings: Callable[..., Settings],
) -> None:
    settings = make_rules_settings(high_risk_amount=450.0)
    at = evaluate_rules(make_txn(amount=450.0), settings)
    assert (at.fired, at.risk_level, at.is_threat) == ((), "low", False)
    cent_above = evaluate_rules(make_txn(amount=450.01), settings)
    assert (cent_above.fired, cent_above.is_threat) == (("above_high_risk_amount",), True)


def test_high_risk_amount_follows_the_setting(make_rules_settings: Callable[..., Settings]) -> None:
    strict = make_rules_settings(high_risk_amount=100.0)
    assert evaluate_rules(make_txn(amount=150.25), strict).is_threat
    relaxed = make_rules_settings(high_risk_amount=1000.0)
    assert not evaluate_rules(make_txn(amount=450.25), relaxed).is_threat


@pytest.mark.parametrize(("amount", "fires"), [(494.99, False), (495.0, True), (499.99, True)])
def test_structuring_band_is_usd_495_to_499_99(
    make_rules_settings: Callable[..., Settings], amount: float, fires: bool
) -> None:
    # Raise the high-risk amount so the band rule is seen on its own.
    settings = make_rules_settings(high_risk_amount=10_000.0)
    verdict = evaluate_rules(make_txn(amount=amount), settings)
    assert ("structuring_band" in verdict.fired) is fires
    assert verdict.is_threat is fires
    in_euros = evaluate_rules(make_txn(amount=amount, currency="EUR"), settings)
    assert "structuring_band" not in in_euros.fired


def test_forex_threshold_is_half_the_high_risk_amount(
    make_rules_settings: Callable[..., Settings],
) -> None:
    settings = make_rules_settings(high_risk_amount=450.0)
    at_half = evaluate_rules(make_txn(category="forex", amount=225.0), settings)
    assert at_half.fired == ()
    above_half = evaluate_rules(make_txn(category="forex", amount=225.01), settings)
    assert above_half.fired == ("large_forex",)
    retail = evaluate_rules(make_txn(category="retail", amount=225.01), settings)
    assert retail.fired == ()


def test_keywords_match_whole_words_only(rules_settings: Settings) -> None:
    for message in ("wireless headphones", "insurgent poetry", "detergent"):
        assert evaluate_rules(make_txn(message=message), rules_settings).fired == ()


def test_round_amounts_below_100_or_with_cents_do_not_fire(rules_settings: Settings) -> None:
    for amount in (50, 99.0, 100.01, 250.5):
        assert "round_amount" not in evaluate_rules(make_txn(amount=amount), rules_settings).fired


def test_moderate_signals_add_up_to_a_threat(rules_settings: Settings) -> None:
    forex_urgent = make_txn(category="forex", amount=250.25, message="urgent transfer")
    verdict = evaluate_rules(forex_urgent, rules_settings)
    assert verdict.score == 4 and verdict.is_threat
    round_and_keyword = evaluate_rules(make_txn(amount=200, message="crypto"), rules_settings)
    assert (round_and_keyword.score, round_and_keyword.risk_level) == (3, "medium")


def test_rule_names_are_unique(rules_settings: Settings) -> None:
    assert len({rule.name for rule in RULES}) == len(RULES)


def test_verdict_fields_are_strings_for_the_verdicts_stream(rules_settings: Settings) -> None:
    processor = TransactionProcessor(rules_settings)
    txn = processor.parse(make_txn(amount=497.5, id="txn-42").to_fields())
    effect = processor.process(txn)
    assert effect.natural_key == "txn-42" == processor.natural_key(txn)
    assert set(effect.result) == {
        "txn_id",
        "merchant",
        "amount",
        "currency",
        "is_threat",
        "risk_level",
        "driver_used",
        "processed_at",
        "day",
        "rules_is_threat",
        "rules_risk_level",
    }
    assert effect.result["day"] == "2026-11-21"
    assert all(isinstance(v, str) for v in effect.result.values())
    assert effect.result["amount"] == "497.50"
    assert (effect.result["is_threat"], effect.result["risk_level"]) == ("true", "high")
    assert effect.result["driver_used"] == "rules"
    processed_at = datetime.fromisoformat(effect.result["processed_at"].replace("Z", "+00:00"))
    assert processed_at.utcoffset() is not None and processed_at.utcoffset().total_seconds() == 0
    assert effect.recent is not None and json.loads(effect.recent) == dict(effect.result)
    assert "above_high_risk_amount" in effect.log_fields["rules_fired"]


def test_invalid_transaction_raises_schema_error_naming_the_field(
    rules_settings: Settings,
) -> None:
    processor = TransactionProcessor(rules_settings)
    with pytest.raises(SchemaError) as error:
        processor.parse({"data": json.dumps({**BASE, "amount": -5})})
    assert error.value.field == "amount"
    with pytest.raises(SchemaError):
        processor.parse({"data": "{not json"})


def test_an_analyzer_verdict_keeps_the_models_narrative(
    analyzer_server: AnalyzerServer, rules_settings: Settings
) -> None:
    analyzer_server.reply = {"is_threat": True, "risk_level": "high", "narrative": "smurfing"}
    processor = TransactionProcessor(rules_settings, HttpAnalyzer(analyzer_server.url, 2.0))
    effect = processor.process(make_txn(id="txn-7"))
    assert effect.result["driver_used"] == "analyzer"
    assert effect.result["narrative"] == "smurfing", "what the model said is kept"
    assert effect.recent is not None and json.loads(effect.recent)["narrative"] == "smurfing"
    # today's contract names no model nor prompt: the verdict records none
    assert not {"model", "prompt_version", "input_tokens"} & set(effect.result)
    # the rules' verdict on the same message is kept beside the model's, and the call's time
    assert (effect.result["rules_is_threat"], effect.result["rules_risk_level"]) == ("false", "low")
    assert int(effect.result["latency_ms"]) >= 0


@pytest.mark.parametrize(
    ("assessment", "recorded"),
    [
        (Assessment(True, "high", "n"), {"analyzer_role": "primary"}),
        (
            Assessment(True, "high", "n", "m", None, None, "fallback"),
            {"analyzer_role": "fallback", "model": "m"},
        ),
        (
            Assessment(True, "high", "n", "gpt-4o", "abc123", Usage(70, 105)),
            {
                "analyzer_role": "primary",
                "model": "gpt-4o",
                "prompt_version": "abc123",
                "input_tokens": "70",
                "output_tokens": "105",
            },
        ),
        (
            Assessment(False, "low", "n", "claude", "abc123", Usage(1500, 90, 1400)),
            {
                "analyzer_role": "primary",
                "model": "claude",
                "prompt_version": "abc123",
                "input_tokens": "1500",
                "output_tokens": "90",
                "cached_input_tokens": "1400",
            },
        ),
        (
            Assessment(False, "low", "n", "m", "v", None),
            {"analyzer_role": "primary", "model": "m", "prompt_version": "v"},
        ),
        (
            Assessment(False, "low", "n", latency_ms=812),
            {"analyzer_role": "primary", "latency_ms": "812"},
        ),
    ],
)
def test_a_verdict_records_what_its_api_reported(
    assessment: Assessment, recorded: dict[str, str]
) -> None:
    assert assessment.recorded() == recorded


def test_a_fallback_records_the_tokens_an_answer_cut_at_max_tokens_was_billed(
    model_api_server: ModelApiServer, rules_settings: Settings
) -> None:
    model_api_server.cut_every = 1
    prompts = {"transaction": load_prompt(transactions.PROMPT, rules_settings)}
    api = OpenAiApi("gpt-4o-mini", max_output_tokens=50)
    analyzer = HttpAnalyzer(model_api_server.url, 2.0, api=api, prompts=prompts)
    effect = TransactionProcessor(rules_settings, analyzer).process(make_txn(id="txn-cut"))
    assert effect.result["driver_used"] == "fallback"
    billed = int(effect.result["input_tokens"]) + int(effect.result["output_tokens"])
    assert (effect.result["model"], effect.result["output_tokens"]) == (OPENAI_MODEL, "50")
    assert billed == model_api_server.billed_tokens
    assert effect.recent is not None and json.loads(effect.recent)["output_tokens"] == "50"


def _model_api_processor(server: ModelApiServer, settings: Settings) -> TransactionProcessor:
    prompts = {"transaction": load_prompt(transactions.PROMPT, settings)}
    api = OpenAiApi("gpt-4o-mini", max_output_tokens=50)
    return TransactionProcessor(settings, HttpAnalyzer(server.url, 2.0, api=api, prompts=prompts))


@pytest.mark.parametrize("rescreen", [True, False], ids=["queued", "setting-off"])
def test_a_fallback_of_a_server_gone_away_is_provisional_and_carries_its_queue_entry(
    model_api_server: ModelApiServer, make_rules_settings: Callable[..., Settings], rescreen: bool
) -> None:
    model_api_server.down = True
    processor = _model_api_processor(
        model_api_server, make_rules_settings(analyzer_rescreen=rescreen)
    )
    txn = make_txn(id="txn-down", timestamp="2026-11-21T23:30:00-02:00")
    effect = processor.process(txn)
    assert effect.result["driver_used"] == "fallback"
    assert (effect.result["fallback_cause"], effect.result["provisional"]) == ("down", "true")
    assert effect.result["day"] == "2026-11-22"
    queued = {**txn.to_fields(), "sentinel_cause": "down", "sentinel_day": "2026-11-22"}
    assert effect.provisional == (queued if rescreen else None)


def test_a_fallback_for_an_unusable_answer_is_final_and_not_queued(
    model_api_server: ModelApiServer, rules_settings: Settings
) -> None:
    model_api_server.cut_every = 1
    effect = _model_api_processor(model_api_server, rules_settings).process(make_txn())
    assert effect.result["fallback_cause"] == "unusable"
    assert "provisional" not in effect.result and effect.provisional is None


@pytest.mark.parametrize("amount", [42.17, 497.5, 300.0])
def test_the_rules_never_read_the_label(amount: float, rules_settings: Settings) -> None:
    """The same payment gets the same rules' verdict whatever its truth says."""
    verdicts = {
        evaluate_rules(make_txn(amount=amount, is_threat=label), rules_settings)
        for label in (True, False, None)
    }
    assert len(verdicts) == 1
