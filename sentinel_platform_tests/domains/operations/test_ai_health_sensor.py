"""The AI's health through real Dagster on the real Redis: during an outage the sensor
records the ``ai_verdicts`` check with every figure and alerts with texts true under the
setting, and the scheduled checks job evaluates the same check without failing its run.

The results are written as the workers commit them (the contract of provisional
verdicts: ``driver_used``, ``fallback_cause``, ``provisional``; the demo's entries marked
``demo=1``), the hold as the fleet sets it, the re-screen queue as the workers fill it."""

from __future__ import annotations

import json
import time
from typing import Any

import dagster as dg

from sentinel_platform.domains.operations.ai_health import CHECK_NAME
from sentinel_platform.domains.operations.ai_health_sensor import (
    SENSOR_NAME,
    build_ai_health_sensor,
)
from sentinel_platform.domains.operations.targets import TRANSACTIONS
from sentinel_platform.redis_server import free_port
from sentinel_platform.schemas import DEMO_FIELD, DEMO_VALUE
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.provisional import (
    FALLBACK_CAUSE,
    PROVISIONAL,
    QUEUE_CAUSE,
    QUEUE_RESULT_ID,
)
from sentinel_platform.streams.operators import analyzer_holds as holds
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, transaction_keys
from sentinel_platform_tests.harness.operations import read_alerts, run_checks_job, tick
from sentinel_platform_tests.harness.streams import sample_transaction
from sentinel_platform_tests.harness.waits import wait_until

ANALYZER = "http://127.0.0.1:9/v1/chat/completions"


def outage(client: RedisClient, keys: StreamKeys) -> None:
    """Five minutes of an outage: 8 provisional fallbacks and 2 model verdicts of the
    user's, 40 demo verdicts by the rules (which must not dilute the share), a spent
    quota holding the fleet, and provisional verdicts queued two hours ago."""
    for n in range(8):
        fields = {"driver_used": "fallback", FALLBACK_CAUSE: "down", PROVISIONAL: "true"}
        client.xadd(keys.results, {**fields, "source_message_id": f"1-{n}"})
    for n in range(2):
        client.xadd(keys.results, {"driver_used": "analyzer", "model": "gpt-x", "n": str(n)})
    for _ in range(40):
        client.xadd(keys.results, {"driver_used": "rules", DEMO_FIELD: DEMO_VALUE})
    holds.register(client, "gpt", ANALYZER)
    record = json.loads(holds.encode_hold("gpt", "", "exhausted", "HTTP 429 quota", None))
    client.set(holds.hold_key("gpt"), json.dumps({**record, "set_at": time.time() - 120}))
    queued_ms = int(time.time() * 1000) - 2 * 3600 * 1000
    for n in range(3):
        queue_fields = {QUEUE_RESULT_ID: f"9-{n}", QUEUE_CAUSE: "down", "data": "{}"}
        client.xadd(keys.rescreen, queue_fields, id=f"{queued_ms}-{n}")


def metadata(evaluation: Any) -> dict[str, Any]:
    return {k: v.value for k, v in evaluation.metadata.items()}


def test_the_sensor_shows_an_outage_in_the_check_and_alerts_true_to_the_setting(
    redis_client: RedisClient, settings: Settings, make_resources, dagster_instance
) -> None:
    keys = transaction_keys(settings)
    outage(redis_client, keys)
    resources = make_resources(analyzer_url=ANALYZER, analyzer_id="gpt")
    sensor = build_ai_health_sensor([TRANSACTIONS])

    data = tick(sensor, dagster_instance, resources, None)

    (evaluation,) = data.asset_events
    assert evaluation.check_name == CHECK_NAME and not evaluation.passed
    assert evaluation.severity == dg.AssetCheckSeverity.ERROR
    meta = metadata(evaluation)
    assert meta["verdicts"] == 10 and meta["fallback_share"] == 0.8 and meta["ai_share"] == 0.2
    assert meta["fallback_causes"] == {"down": 8} and meta["exhausted"] is True
    assert meta["provisional_waiting"] == 3 and meta["provisional_oldest_age_s"] > 7000
    assert meta["when_down"] == "rules"
    alerts = {a.condition.split(":")[0]: a for a in read_alerts(redis_client, settings)}
    assert {a.source for a in alerts.values()} == {SENSOR_NAME}
    assert set(alerts) == {"fallback_share", "provisional_backlog", "analyzer_hold"}
    assert all(a.severity == "error" for a in alerts.values())
    assert "80% of the 10 verdicts" in alerts["fallback_share"].summary
    held = alerts["analyzer_hold"].summary
    assert "decided by the rules and marked provisional" in held and "wait" not in held

    redis_client.delete(settings.alerts_stream)
    waiting = make_resources(analyzer_url=ANALYZER, analyzer_id="gpt", analyzer_when_down="wait")
    redis_client.delete(holds.hold_key("gpt"))
    redis_client.set(holds.hold_key("gpt"), holds.encode_hold("gpt", "", "exhausted", "q", None))
    tick(sensor, dagster_instance, waiting, None)
    (held_alert,) = read_alerts(redis_client, settings, SENSOR_NAME)[-1:]
    assert held_alert.condition.startswith("analyzer_hold")
    assert "messages wait for the analyzer" in held_alert.summary
    assert "rules" not in held_alert.summary


def test_the_checks_job_evaluates_the_ai_check_without_failing_its_run(
    redis_client: RedisClient, settings: Settings, make_resources, dagster_instance
) -> None:
    keys = transaction_keys(settings)
    redis_client.xgroup_create(keys.stream, keys.group, id="0", mkstream=True)
    outage(redis_client, keys)
    resources = make_resources(analyzer_url=ANALYZER, analyzer_id="gpt")

    result = run_checks_job(dagster_instance, resources)

    evaluations = {e.check_name: e for e in result.get_asset_check_evaluations()}
    ai = evaluations[CHECK_NAME]
    assert not ai.passed and ai.severity == dg.AssetCheckSeverity.ERROR
    assert metadata(ai)["fallback_share"] == 0.8
    assert "exhausted" in (ai.description or "")
    # a failed AI check is no failed run: only the lag check with no live worker fails it
    failed = [e.step_key for e in result.all_events if e.is_step_failure]
    assert not any(CHECK_NAME in (key or "") for key in failed), failed


def test_a_real_worker_facing_a_down_analyzer_shows_in_the_check_and_the_alert(
    redis_client: RedisClient,
    settings: Settings,
    make_resources,
    dagster_instance,
    start_worker,
) -> None:
    """A real worker on the defaults (``SENTINEL_ANALYZER_WHEN_DOWN=rules``) whose model
    server is down (nothing listens on its port): every verdict is the rules', and the
    sensor's check and alert say so with the text true under ``rules``."""
    keys = transaction_keys(settings)
    down = f"http://127.0.0.1:{free_port()}/v1/chat/completions"
    worker = start_worker(processor=None, env={"SENTINEL_ANALYZER_URL": down})
    worker.wait_ready(redis_client)
    for n in range(12):
        redis_client.xadd(keys.stream, sample_transaction(n).to_fields())
    wait_until(lambda: redis_client.xlen(keys.results) >= 12, 60, what="12 verdicts")
    sensor = build_ai_health_sensor([TRANSACTIONS])

    data = tick(sensor, dagster_instance, make_resources(analyzer_url=down), None)

    (evaluation,) = data.asset_events
    meta = metadata(evaluation)
    assert not evaluation.passed and evaluation.severity == dg.AssetCheckSeverity.ERROR
    assert meta["verdicts"] == 12 and meta["fallback_share"] == 1.0, meta
    (alert,) = read_alerts(redis_client, settings, SENSOR_NAME)
    assert alert.condition == "fallback_share" and alert.severity == "error"
    assert "100% of the 12 verdicts" in alert.summary and "decided by the rules" in alert.summary
    assert worker.stop() == 0, worker.log_tail()
