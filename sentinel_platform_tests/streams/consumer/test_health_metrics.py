"""The worker's health series: age at commit (from entry ids), the group's oldest pending
age, the in-flight limit in force and verdicts by who decided, each through its hook."""

from __future__ import annotations

import pytest

from sentinel_platform.streams.consumer.metrics import AGE_BUCKETS, VERDICT_DRIVERS, Metrics

LABELS = {"stream": "transactions", "group": "g", "consumer": "c"}


def _sample(metrics: Metrics, name: str, **extra: str) -> float | None:
    return metrics.registry.get_sample_value(name, {**LABELS, **extra})


def test_commit_ages_come_from_entry_ids_into_buckets_up_to_hours() -> None:
    metrics = Metrics(labels=LABELS)
    now_s = 1_700_000_100.0
    metrics.observe_commit_ages(["1700000099950-0", "1700000040000-3", "1700000200000-0"], now_s)
    metrics.observe_commit_age(7200.0)
    name = "sentinel_worker_commit_age_seconds"
    assert _sample(metrics, f"{name}_count") == 4
    assert _sample(metrics, f"{name}_sum") == pytest.approx(0.05 + 60 + 0 + 7200)
    assert _sample(metrics, f"{name}_bucket", le="0.05") == 2  # 0.05 s and the future id (0)
    assert _sample(metrics, f"{name}_bucket", le="60.0") == 3
    assert _sample(metrics, f"{name}_bucket", le="3600.0") == 3
    assert _sample(metrics, f"{name}_bucket", le="21600.0") == 4
    assert max(AGE_BUCKETS) >= 6 * 3600


def test_oldest_pending_age_and_in_flight_limit_are_gauges() -> None:
    metrics = Metrics(labels=LABELS)
    metrics.set_oldest_pending_age(42.5)
    metrics.set_in_flight_limit(8)
    assert _sample(metrics, "sentinel_worker_oldest_pending_age_seconds") == 42.5
    assert _sample(metrics, "sentinel_worker_in_flight_limit") == 8
    metrics.set_oldest_pending_age(-3)  # a clock behind the server's reads 0
    assert _sample(metrics, "sentinel_worker_oldest_pending_age_seconds") == 0


def test_verdicts_by_driver_exist_from_the_start_and_refuse_an_unknown_driver() -> None:
    metrics = Metrics(labels=LABELS)
    for driver in VERDICT_DRIVERS:
        assert _sample(metrics, "sentinel_worker_verdicts_total", driver=driver) == 0
    metrics.count_verdict("fallback")
    metrics.count_verdict("fallback")
    metrics.count_verdict("analyzer")
    assert _sample(metrics, "sentinel_worker_verdicts_total", driver="fallback") == 2
    assert _sample(metrics, "sentinel_worker_verdicts_total", driver="analyzer") == 1
    with pytest.raises(KeyError, match="guess"):
        metrics.count_verdict("guess")
    assert metrics.snapshot()["verdicts_fallback"] == 2
