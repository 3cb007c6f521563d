"""Compliance events: audit routing strictly above the threshold, fallbacks, trace context."""

from __future__ import annotations

from typing import Any

import pytest

from sentinel_platform.schemas import Axiom, SchemaError
from sentinel_platform.settings import Settings
from sentinel_platform_tests.harness.analyzer_server import AnalyzerServer
from sentinel_platform_tests.harness.model_api_bodies import OPENAI_MODEL
from sentinel_platform_tests.harness.model_api_server import ModelApiServer
from workers.analyzer import HttpAnalyzer
from workers.analyzer.apis.openai_api import OpenAiApi
from workers.analyzer.prompts import load_prompt
from workers.processors import AxiomProcessor, axioms

TRACEPARENT = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
RESULT_FIELDS = {
    "source_id",
    "domain",
    "status",
    "metric_value",
    "anomaly_score",
    "emitted_at",
    "day",
    "routed_to_ai",
    "risk_level",
    "audit_narrative",
    "driver_used",
}


def make_axiom(**overrides: Any) -> Axiom:
    fields = {
        "status": "nominal",
        "metric_value": "12.5",
        "anomaly_score": "0.1",
        "source_id": "sensor-7",
        "emitted_at": "2026-11-21T10:00:00Z",
        "domain": "aml",
    }
    fields.update({k: str(v) for k, v in overrides.items()})
    return Axiom.from_fields(fields)


def with_analyzer(server: AnalyzerServer, settings: Settings) -> AxiomProcessor:
    return AxiomProcessor(settings, HttpAnalyzer(server.url, 2.0))


def test_score_exactly_at_threshold_is_not_routed(
    analyzer_server: AnalyzerServer, rules_settings: Settings
) -> None:
    threshold = rules_settings.axiom_audit_threshold
    effect = with_analyzer(analyzer_server, rules_settings).process(
        make_axiom(anomaly_score=threshold)
    )
    assert effect.result["routed_to_ai"] == "false"
    assert effect.result["driver_used"] == "rules"
    assert effect.result["audit_narrative"].startswith("Not audited")
    assert analyzer_server.requests == []


def test_score_strictly_above_threshold_is_routed_to_the_analyzer(
    analyzer_server: AnalyzerServer, rules_settings: Settings
) -> None:
    analyzer_server.reply = {"is_threat": True, "risk_level": "medium", "narrative": "drift"}
    score = rules_settings.axiom_audit_threshold + 0.001
    effect = with_analyzer(analyzer_server, rules_settings).process(make_axiom(anomaly_score=score))
    assert (effect.result["routed_to_ai"], effect.result["driver_used"]) == ("true", "analyzer")
    assert (effect.result["risk_level"], effect.result["audit_narrative"]) == ("medium", "drift")
    (request,) = analyzer_server.requests
    assert request["body"]["kind"] == "axiom"
    assert request["body"]["payload"]["source_id"] == "sensor-7"


@pytest.mark.parametrize(
    ("status", "score", "risk"),
    [
        ("nominal", 0.1, "low"),
        ("degraded", 0.1, "medium"),
        ("critical", 0.1, "high"),
        ("nominal", 0.95, "medium"),
        ("degraded", 0.95, "high"),
        ("critical", 0.95, "high"),
    ],
)
def test_rule_risk_follows_status_and_is_raised_when_audited(
    rules_settings: Settings, status: str, score: float, risk: str
) -> None:
    effect = AxiomProcessor(rules_settings).process(make_axiom(status=status, anomaly_score=score))
    assert effect.result["risk_level"] == risk
    assert (effect.result["routed_to_ai"], effect.result["driver_used"]) == ("false", "rules")
    audited = score > rules_settings.axiom_audit_threshold
    expected = "Rule-based audit" if audited else "Not audited"
    assert effect.result["audit_narrative"].startswith(expected)


@pytest.mark.parametrize("mode", ["error", "bad_json"])
def test_failing_analyzer_yields_high_risk_and_rule_based_fallback(
    analyzer_server: AnalyzerServer, rules_settings: Settings, mode: str
) -> None:
    analyzer_server.mode = mode
    effect = with_analyzer(analyzer_server, rules_settings).process(make_axiom(anomaly_score=0.9))
    assert effect.result["risk_level"] == "high"
    assert effect.result["audit_narrative"].startswith("Rule-based fallback")
    assert (effect.result["routed_to_ai"], effect.result["driver_used"]) == ("true", "fallback")
    assert "analyzer_error" in effect.log_fields


def test_trace_context_reaches_logs_and_analyzer_headers_never_results(
    analyzer_server: AnalyzerServer, rules_settings: Settings
) -> None:
    axiom = make_axiom(anomaly_score=0.99, traceparent=TRACEPARENT, tracestate="vendor=abc")
    for processor in (
        AxiomProcessor(rules_settings),
        with_analyzer(analyzer_server, rules_settings),
    ):
        effect = processor.process(axiom)
        # the analyzer's verdict names its role and times its call
        said = {"analyzer_role", "latency_ms"} if processor.analyzer is not None else set()
        assert set(effect.result) == RESULT_FIELDS | said
        assert not any(
            TRACEPARENT in value or "vendor=abc" in value for value in effect.result.values()
        )
        assert effect.log_fields["traceparent"] == TRACEPARENT
        assert effect.log_fields["tracestate"] == "vendor=abc"
    (request,) = analyzer_server.requests
    assert request["headers"]["traceparent"] == TRACEPARENT
    assert "traceparent" not in request["body"]["payload"]


def test_event_fields_are_strings_and_keyed_by_source_and_time(rules_settings: Settings) -> None:
    processor = AxiomProcessor(rules_settings)
    fields = make_axiom().to_fields()
    del fields["domain"]
    axiom = processor.parse(fields)
    effect = processor.process(axiom)
    assert effect.natural_key == "sensor-7|2026-11-21T10:00:00Z" == processor.natural_key(axiom)
    assert set(effect.result) == RESULT_FIELDS
    assert all(isinstance(v, str) for v in effect.result.values())
    assert effect.result["domain"] == "unknown"
    assert float(effect.result["metric_value"]) == 12.5
    assert float(effect.result["anomaly_score"]) == 0.1
    assert effect.recent is None


def test_invalid_axiom_raises_schema_error_naming_the_field(rules_settings: Settings) -> None:
    with pytest.raises(SchemaError) as error:
        AxiomProcessor(rules_settings).parse(make_axiom().to_fields() | {"anomaly_score": "1.5"})
    assert error.value.field == "anomaly_score"


def test_a_fallback_records_the_tokens_an_answer_cut_at_max_tokens_was_billed(
    model_api_server: ModelApiServer, rules_settings: Settings
) -> None:
    model_api_server.cut_every = 1
    prompts = {"axiom": load_prompt(axioms.PROMPT, rules_settings)}
    api = OpenAiApi("gpt-4o-mini", max_output_tokens=50)
    analyzer = HttpAnalyzer(model_api_server.url, 2.0, api=api, prompts=prompts)
    effect = AxiomProcessor(rules_settings, analyzer).process(make_axiom(anomaly_score=0.9))
    assert effect.result["driver_used"] == "fallback"
    assert "cut at SENTINEL_ANALYZER_MAX_OUTPUT_TOKENS" in effect.log_fields["analyzer_error"]
    billed = int(effect.result["input_tokens"]) + int(effect.result["output_tokens"])
    assert (effect.result["model"], effect.result["output_tokens"]) == (OPENAI_MODEL, "50")
    assert billed == model_api_server.billed_tokens
