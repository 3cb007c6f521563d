"""Which committed verdicts the confusion-matrix counter counts, and where, from a table."""

from __future__ import annotations

import pytest
from prometheus_client import CollectorRegistry

from sentinel_platform.streams.consumer.outcome_metrics import OutcomeCounter

LABELS = {"stream": "s", "group": "g", "consumer": "c"}
MODEL = {"driver_used": "analyzer", "model": "m", "prompt_version": "v"}


@pytest.mark.parametrize(
    ("result", "cell"),
    [
        ({**MODEL, "label": "true", "is_threat": "true"}, "tp"),
        ({**MODEL, "label": "false", "is_threat": "true"}, "fp"),
        ({**MODEL, "label": "false", "is_threat": "false"}, "tn"),
        ({**MODEL, "label": "true", "is_threat": "false"}, "fn"),
        ({**MODEL, "is_threat": "true"}, None),  # no truth
        ({**MODEL, "driver_used": "fallback", "label": "true", "is_threat": "true"}, None),
        ({"driver_used": "rules", "label": "true", "is_threat": "true"}, None),
        ({"driver_used": "analyzer", "label": "true", "is_threat": "true"}, None),  # no model
    ],
)
def test_a_labelled_model_verdict_is_counted_in_its_cell(
    result: dict[str, str], cell: str | None
) -> None:
    registry = CollectorRegistry()
    OutcomeCounter(registry, "sentinel_worker", LABELS).count(result)
    counted = {
        sample.labels["outcome"]: sample.value
        for metric in registry.collect()
        for sample in metric.samples
        if sample.name == "sentinel_worker_verdict_outcomes_total"
    }
    assert counted == ({} if cell is None else {cell: 1.0})


@pytest.mark.parametrize(
    ("role", "label"),
    [
        (None, "primary"),  # a verdict written before it said its role
        ("primary", "primary"),
        ("fallback", "fallback"),
        ("shadow", "shadow"),
        ("made-up", "other"),
    ],
)
def test_the_role_tells_the_primary_the_fallback_and_the_shadow_apart(
    role: str | None, label: str
) -> None:
    registry = CollectorRegistry()
    result = {**MODEL, "label": "true", "is_threat": "true"}
    OutcomeCounter(registry, "sentinel_worker", LABELS).count(
        result if role is None else {**result, "analyzer_role": role}
    )
    counted = [
        (sample.labels["role"], sample.labels["outcome"])
        for metric in registry.collect()
        for sample in metric.samples
        if sample.name == "sentinel_worker_verdict_outcomes_total"
    ]
    assert counted == [(label, "tp")]


def test_model_and_prompt_names_are_bounded() -> None:
    registry = CollectorRegistry()
    counter = OutcomeCounter(registry, "sentinel_worker", LABELS)
    for i in range(10):
        counter.count({**MODEL, "prompt_version": f"v{i}", "label": "true", "is_threat": "true"})
    prompts = {
        sample.labels["prompt_version"]
        for metric in registry.collect()
        for sample in metric.samples
        if sample.name == "sentinel_worker_verdict_outcomes_total"
    }
    assert prompts == {*(f"v{i}" for i in range(8)), "other"}
