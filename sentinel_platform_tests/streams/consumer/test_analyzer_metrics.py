"""Each analyzer role's series apart: what one role counts never shows under another, a
second role's series appear when it is bound (every one at 0), and the shadow's drops
are counted by reason."""

from __future__ import annotations

import pytest

from sentinel_platform.streams.consumer.analyzer_metrics import (
    ANALYZER_OUTCOMES,
    ROLES,
    SHADOW_DROPS,
)
from sentinel_platform.streams.consumer.metrics import Metrics
from workers.analyzer.lanes.fallback import FALLBACK, PRIMARY
from workers.analyzer.lanes.shadow_record import SHADOW

LABELS = {"stream": "transactions", "group": "g", "consumer": "c"}
CALLS = "sentinel_worker_analyzer_calls_total"


def calls(metrics: Metrics, role: str, outcome: str) -> float | None:
    """The sample, or None when the series does not exist."""
    labels = {**LABELS, "role": role, "outcome": outcome}
    return metrics.registry.get_sample_value(CALLS, labels)


def test_the_lanes_roles_are_the_metrics_roles() -> None:
    assert (PRIMARY, FALLBACK, SHADOW) == ROLES


def test_the_primarys_series_exist_from_the_start_and_a_second_roles_once_bound() -> None:
    metrics = Metrics(labels=LABELS)
    assert [calls(metrics, PRIMARY, o) for o in ANALYZER_OUTCOMES] == [0.0] * 6
    assert calls(metrics, FALLBACK, "ok") is None, "no fallback, no fallback series"
    fallback = metrics.analyzer(FALLBACK)
    assert metrics.analyzer(FALLBACK) is fallback, "one meter per role"
    assert [calls(metrics, FALLBACK, o) for o in ANALYZER_OUTCOMES] == [0.0] * 6
    gauge = {**LABELS, "role": FALLBACK}
    assert metrics.registry.get_sample_value("sentinel_worker_analyzer_exhausted", gauge) == 0


@pytest.mark.parametrize("role", ROLES)
def test_what_a_role_counts_shows_under_that_role_alone(role: str) -> None:
    metrics = Metrics(labels=LABELS)
    meters = {r: metrics.analyzer(r) for r in ROLES}
    meters[role].count_call("error")
    meters[role].count_circuit_change("open")
    meters[role].set_exhausted(True)
    meters[role].circuit_state_from(lambda: 2.0)
    meters[role].count_tokens("m", 10, 2, None)
    snapshot = metrics.snapshot()
    for other in ROLES:
        named = "" if other == PRIMARY else f"{other}_"
        mine = 1.0 if other == role else 0.0
        assert snapshot[f"{named}analyzer_calls_error"] == mine, other
        assert snapshot[f"{named}analyzer_circuit_changes_open"] == mine, other
        assert snapshot[f"{named}analyzer_exhausted"] == mine, other
        assert snapshot[f"{named}analyzer_circuit_state"] == 2 * mine, other
        tokens = {**LABELS, "role": other, "model": "m", "kind": "input"}
        sample = metrics.registry.get_sample_value("sentinel_worker_analyzer_tokens_total", tokens)
        assert (sample or 0.0) == 10 * mine, other


def test_the_shadows_drops_are_counted_by_reason_from_its_binding() -> None:
    metrics = Metrics(labels=LABELS)
    assert "shadow_dropped_late" not in metrics.snapshot(), "no shadow, no drop series"
    metrics.analyzers.shadow_drops()
    assert {f"shadow_dropped_{r}" for r in SHADOW_DROPS} <= set(metrics.snapshot())
    metrics.analyzers.count_shadow_drop("late")
    metrics.analyzers.count_shadow_drop("late")
    snapshot = metrics.snapshot()
    assert (snapshot["shadow_dropped_late"], snapshot["shadow_dropped_failed"]) == (2, 0)


def test_unknown_roles_outcomes_and_reasons_raise() -> None:
    metrics = Metrics(labels=LABELS)
    with pytest.raises(KeyError, match="backup"):
        metrics.analyzer("backup")
    with pytest.raises(KeyError, match="timed_out"):
        metrics.analyzer().count_call("timed_out")
    with pytest.raises(KeyError, match="ajar"):
        metrics.analyzer().count_circuit_change("ajar")
    with pytest.raises(KeyError, match="lost"):
        metrics.analyzers.count_shadow_drop("lost")
