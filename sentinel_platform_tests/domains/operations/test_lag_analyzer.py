"""Backpressure advice that names the analyzer when its capacity limits the drain:
the decision from tables, and the lag sensor's check and alert through real Dagster on
the real Redis with the fleet held off its analyzer."""

from __future__ import annotations

import json
import time

import pytest

from sentinel_platform.domains.operations.ai_health import AiFigures
from sentinel_platform.domains.operations.lag_analyzer import (
    AnalyzerBound,
    analyzer_advice,
    analyzer_bound,
)
from sentinel_platform.domains.operations.lag_gate import SENSOR_NAME, build_lag_sensor
from sentinel_platform.domains.operations.lag_verdict import lag_advice
from sentinel_platform.domains.operations.targets import TRANSACTIONS
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.provisional import NOTHING
from sentinel_platform.streams.backlog.verdict_mix import summarise
from sentinel_platform.streams.backlog.zones import ZoneLimits
from sentinel_platform.streams.operators import analyzer_holds as holds
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.domains.operations.test_lag_gate import drive_lag, lag_evaluations
from sentinel_platform_tests.harness.operations import LAG_THRESHOLDS, read_alerts, tick

MORE_WORKERS = "add workers or raise SENTINEL_WORKER_CONCURRENCY"


def figures(
    drivers: dict[str, int] | None = None,
    causes: tuple[str, ...] = (),
    when_down: str = "rules",
    configured: bool = True,
    tokens: int = 0,
) -> AiFigures:
    rows = [{"driver_used": d} for d, n in (drivers or {}).items() for _ in range(n)]
    rows += [{"driver_used": "analyzer", "input_tokens": str(tokens)}] if tokens else []
    found = [holds.Hold("gpt", "", cause, "why", None, None) for cause in causes]
    return AiFigures(
        "transactions", summarise(rows, 300, 60.0), {}, found, NOTHING, when_down, configured
    )


@pytest.mark.parametrize(
    ("case", "rate", "rate_limit", "tokens_per_minute", "kind"),
    [
        pytest.param(figures({"analyzer": 9}, ("exhausted",)), 0.0, None, None, "held", id="spent"),
        pytest.param(figures({}, ("retry_after",)), 0.0, None, None, "held", id="retry-after"),
        pytest.param(figures({}, ("announced_limit",)), 5.0, None, None, "paced", id="announced"),
        pytest.param(figures({"analyzer": 9}), 4.5, 5.0, None, "budget", id="rate-limit-used"),
        pytest.param(figures({"rules": 9}), 2.0, 5.0, None, None, id="rate-limit-not-used"),
        pytest.param(figures(tokens=9000), 1.0, None, 10_000, "budget", id="tokens-used"),
        pytest.param(figures(when_down="wait"), 0.0, None, None, "waiting_down", id="wait-down"),
        pytest.param(figures(), 0.0, None, None, None, id="rules-quiet"),
        pytest.param(figures({"analyzer": 9}), 3.0, None, None, "model_speed", id="model-bound"),
        pytest.param(figures({"rules": 9, "analyzer": 1}), 3.0, None, None, None, id="rules"),
        pytest.param(
            figures({"analyzer": 9}, ("exhausted",), configured=False),
            0.0,
            None,
            None,
            None,
            id="no-analyzer",
        ),
    ],
)
def test_the_analyzer_is_named_when_its_capacity_limits_the_drain(
    case: AiFigures,
    rate: float,
    rate_limit: float | None,
    tokens_per_minute: int | None,
    kind: str | None,
) -> None:
    bound = analyzer_bound(case, rate, rate_limit, tokens_per_minute)
    assert (bound.kind if bound else None) == kind
    if bound is not None and kind != "model_speed":
        assert "more workers" in bound.advice and "cannot" in bound.advice


@pytest.mark.parametrize("when_down", ["rules", "wait"])
def test_a_held_analyzers_advice_is_true_under_the_setting(when_down: str) -> None:
    bound = analyzer_bound(figures(causes=("exhausted",), when_down=when_down), 0.0)
    assert bound is not None
    said = "decided by the rules" if when_down == "rules" else "messages wait"
    assert said in bound.advice


def test_the_lag_advice_names_the_analyzer_not_more_workers() -> None:
    bound = AnalyzerBound("paced", "The fleet paces itself to the budget.", "paced")
    seconds = ZoneLimits(warn_s=2.0, pause_s=10.0, in_flight=0)
    assert MORE_WORKERS in lag_advice("backpressure", seconds)
    advised = lag_advice("backpressure", seconds, bound)
    assert "paces itself" in advised and MORE_WORKERS not in advised
    assert advised == analyzer_advice("backpressure", bound)
    assert "start the workers" in lag_advice("worker_off", seconds, bound)


def test_the_lag_sensor_names_the_held_analyzer_in_its_check_and_alert(
    redis_client: RedisClient,
    settings: Settings,
    make_resources,
    dagster_instance,
    clock,
    live_worker,
) -> None:
    """The fleet is held off its analyzer (a spent quota) and the lag reaches backpressure:
    the lag check and the zone alert say the analyzer limits the drain, not the workers."""
    keys = transaction_keys(settings)
    live_worker(keys)  # creates the group as a worker does
    holds.register(redis_client, "gpt", "http://127.0.0.1:9/v1")
    record = json.loads(holds.encode_hold("gpt", "", "exhausted", "quota used up", None))
    redis_client.set(holds.hold_key("gpt"), json.dumps({**record, "set_at": time.time()}))
    resources = make_resources(
        analyzer_url="http://127.0.0.1:9/v1/chat/completions", analyzer_id="gpt", **LAG_THRESHOLDS
    )
    sensor = build_lag_sensor([TRANSACTIONS], clock=clock)

    drive_lag(redis_client, keys, 12)
    data = tick(sensor, dagster_instance, resources, None)

    (evaluation,) = lag_evaluations(data)
    assert evaluation.metadata["zone"].value == "backpressure"
    assert evaluation.metadata["limited_by_analyzer"].value == "held"
    assert "The fleet is held off the analyzer" in (evaluation.description or "")
    assert MORE_WORKERS not in (evaluation.description or "")
    (alert,) = read_alerts(redis_client, settings, SENSOR_NAME)
    assert "the analyzer is held (exhausted), more workers cannot help" in alert.summary
    assert alert.details["limited_by_analyzer"] == "held"
    assert "decided by the rules" in alert.details["advice"]
