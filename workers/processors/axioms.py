"""Compliance events from telemetry axioms, with an audit for anomalous readings.

Only readings whose anomaly score is *strictly above* ``SENTINEL_AXIOM_AUDIT_THRESHOLD``
are audited; the analyzer (when configured) is the expensive part, so ordinary readings
never reach it. Risk by rules follows the status (nominal: low, degraded: medium,
critical: high) and an audited reading is raised one level. When the analyzer fails the
reading is treated as ``high`` risk: an anomaly nobody could assess must not pass
quietly. The W3C trace context goes to the log only; results stay free of it.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from sentinel_platform.schemas import Axiom, RiskLevel, describe_error
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.provisional import DAY, day_of
from sentinel_platform.streams.consumer.processor import Busy, Effect, Unprocessable
from workers.analyzer import StreamPrompt, billed_fields
from workers.processors.base import WireProcessor, analyzer_of

FALLBACK_PREFIX = "Rule-based fallback"
STATUS_RISK: dict[str, RiskLevel] = {"nominal": "low", "degraded": "medium", "critical": "high"}
RAISED: dict[RiskLevel, RiskLevel] = {"low": "medium", "medium": "high", "high": "high"}


class AxiomVerdict(BaseModel):
    """What a model API must answer about an audited reading (its JSON schema is generated
    from this model and sent with every call; a reply that does not validate is "wrong")."""

    model_config = ConfigDict(extra="forbid", strict=True)

    is_threat: bool = Field(description="true when the reading needs action")
    risk_level: RiskLevel = Field(description="low, medium or high")
    narrative: str = Field(description="one to three sentences for the audit trail")


#: The axioms stream's prompt: packaged instructions, replaceable by a file.
PROMPT = StreamPrompt(
    kind="axiom",
    text_file="axioms.txt",
    setting="analyzer_axioms_prompt_file",
    verdict=AxiomVerdict,
)


def rule_risk(axiom: Axiom, audited: bool) -> RiskLevel:
    base = STATUS_RISK[axiom.status]
    return RAISED[base] if audited else base


def describe_reading(axiom: Axiom, threshold: float) -> str:
    comparison = "above" if axiom.anomaly_score > threshold else "at or below"
    return (
        f"source {axiom.source_id} ({axiom.domain or 'unknown'}) reported {axiom.status}, "
        f"metric {axiom.metric_value:g}, anomaly score {axiom.anomaly_score:.3f} "
        f"{comparison} audit threshold {threshold:.3f}."
    )


def trace_context(axiom: Axiom) -> dict[str, str]:
    """The W3C trace headers the producer attached, for log correlation only."""
    pairs = (("traceparent", axiom.traceparent), ("tracestate", axiom.tracestate))
    return {name: value for name, value in pairs if value is not None}


class AxiomProcessor(WireProcessor[Axiom]):
    """Turns an axiom into one ``sentinel:compliance_events`` entry.

    ``routed_to_ai`` is "true" when the analyzer was asked (even if it then failed);
    ``driver_used`` is ``rules``, ``analyzer`` or ``fallback`` (saying why: ``fallback_cause``,
    and ``provisional`` when the model is to be asked again). Every result has the
    reading's ``day``. A model API's verdict
    also records ``model``, ``prompt_version`` and the tokens (extra fields). A busy analyzer raises
    :class:`Busy` through :meth:`process` (the loop calls again later), never a fallback.
    """

    stream = "axioms"
    name = "axioms"

    def process(self, message: Axiom, model_only: bool = False) -> Effect:
        threshold = self.settings.axiom_audit_threshold
        day = day_of(message.emitted_at)
        provisional = None
        audited = message.anomaly_score > threshold
        reading = describe_reading(message, threshold)
        log_fields: dict[str, Any] = {
            "source_id": message.source_id,
            "emitted_at": message.emitted_at,
        }
        log_fields.update(trace_context(message))
        analyzer = self.analyzer_for(message) if audited else None
        risk, driver = rule_risk(message, audited), "rules"
        narrative = f"Rule-based audit: {reading}" if audited else f"Not audited: {reading}"
        recorded: dict[str, str] = {}
        if analyzer is not None:
            try:
                assessment = analyzer.assess_axiom(message)
                risk, driver, narrative = assessment.risk_level, "analyzer", assessment.narrative
                recorded = assessment.recorded()
            except Busy:  # at capacity: the reading waits for its audit
                raise
            except Unprocessable:  # no verdict may be made without the analyzer: DLQ
                raise
            except Exception as exc:  # any analyzer failure means: assume the worst
                fell = self.fallback_of(message, exc, day, model_only)
                risk, driver, provisional = "high", "fallback", fell.queue
                narrative = f"{FALLBACK_PREFIX} (analyzer unavailable): {reading}"
                log_fields["analyzer_error"] = describe_error(exc)
                recorded = {**billed_fields(exc), **fell.fields}  # billed: an answer, no verdict
        result = {
            "source_id": message.source_id,
            "domain": message.domain or "unknown",
            "status": message.status,
            "metric_value": repr(message.metric_value),
            "anomaly_score": repr(message.anomaly_score),
            "emitted_at": message.emitted_at,
            "routed_to_ai": "true" if analyzer is not None else "false",
            "risk_level": risk,
            "audit_narrative": narrative,
            "driver_used": driver,
            DAY: day,
            **recorded,
        }
        fields = self.marked(message, {**log_fields, "driver_used": driver})
        result = self.marked(message, result)
        sample = self.is_sample(driver)
        return Effect(message.natural_key, result, None, fields, sample, provisional)


def from_settings(settings: Settings) -> AxiomProcessor:
    """The processor a worker runs: with the analyzer of ``SENTINEL_ANALYZER_URL`` if set.

    Called once per worker process, so the worker keeps one analyzer, and with it one
    pool of kept-alive connections, for all its messages.
    """
    return AxiomProcessor(settings, analyzer_of(settings, PROMPT))
