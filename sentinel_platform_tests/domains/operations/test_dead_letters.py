"""New dead letters raise one summarised alert per tick; a restart never re-alerts old ones."""

from __future__ import annotations

import json
import time

import dagster as dg

from sentinel_platform.domains.operations.dead_letters import SENSOR_NAME, dead_letter_queue_sensor
from sentinel_platform.domains.operations.targets import (
    AXIOMS,
    DEAD_LETTER_QUEUE_ASSET,
    TRANSACTIONS,
)
from sentinel_platform.schemas import DeadLetter
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform_tests.harness.operations import read_alerts, tick
from sentinel_platform_tests.harness.waits import wait_until


def dead_letter(
    message_id: str, stream: str, reason: str = "invalid_message", error: str = "bad json"
) -> DeadLetter:
    return DeadLetter(
        stream=stream,
        group="g",
        message_id=message_id,
        payload=json.dumps({"data": "{"}),
        reason=reason,  # type: ignore[arg-type]
        error=error,
        deliveries=1,
        consumer="c1",
        dead_lettered_at="2026-01-10T12:00:00+00:00",
    )


def depth_observation(data) -> dict:
    (obs,) = [e for e in data.asset_events if isinstance(e, dg.AssetObservation)]
    assert obs.asset_key == DEAD_LETTER_QUEUE_ASSET
    return {k: v.value for k, v in obs.metadata.items()}


def test_new_dead_letters_raise_one_summarised_alert(
    redis_client: RedisClient, settings: Settings, make_resources, dagster_instance
) -> None:
    resources = make_resources()
    empty = tick(dead_letter_queue_sensor, dagster_instance, resources, None)
    assert "no new dead letters" in empty.skip_message
    assert read_alerts(redis_client, settings) == []

    dlq = settings.dlq_stream
    redis_client.xadd(dlq, dead_letter("1-0", "transactions").to_fields())
    redis_client.xadd(dlq, dead_letter("2-0", "transactions", error="amount < 0").to_fields())
    redis_client.xadd(
        dlq, dead_letter("3-0", "synapse:axioms", "max_deliveries_exceeded").to_fields()
    )
    data = tick(dead_letter_queue_sensor, dagster_instance, resources, empty.cursor)

    (alert,) = read_alerts(redis_client, settings, SENSOR_NAME)
    assert alert.severity == "error"  # a max-deliveries death is a processing failure
    assert alert.details["by_stream"] == {"transactions": 2, "synapse:axioms": 1}
    assert alert.details["by_reason"] == {"invalid_message": 2, "max_deliveries_exceeded": 1}
    assert alert.details["message_ids"] == ["1-0", "2-0", "3-0"]
    assert set(alert.details["sample_errors"]) == {"bad json", "amount < 0"}
    assert depth_observation(data)["depth"] == 3 and depth_observation(data)["new"] == 3
    checks = {e.asset_key: e for e in data.asset_events if isinstance(e, dg.AssetCheckEvaluation)}
    recent = {k: (e.passed, e.metadata["recent_dead_letters"].value) for k, e in checks.items()}
    assert recent == {TRANSACTIONS.asset_key: (False, 2), AXIOMS.asset_key: (False, 1)}


def test_old_dead_letters_never_realert_after_restart(
    redis_client: RedisClient, settings: Settings, make_resources, dagster_instance
) -> None:
    dlq = settings.dlq_stream
    redis_client.xadd(dlq, dead_letter("1-0", "transactions").to_fields())
    first = tick(dead_letter_queue_sensor, dagster_instance, make_resources(), None)
    assert len(read_alerts(redis_client, settings, SENSOR_NAME)) == 1  # baseline report

    # a restarted daemon: fresh resources, same persisted cursor
    again = tick(dead_letter_queue_sensor, dagster_instance, make_resources(), first.cursor)
    assert len(read_alerts(redis_client, settings, SENSOR_NAME)) == 1
    assert depth_observation(again)["new"] == 0

    redis_client.xadd(dlq, dead_letter("9-0", "transactions").to_fields())
    tick(dead_letter_queue_sensor, dagster_instance, make_resources(), again.cursor)
    alerts = read_alerts(redis_client, settings, SENSOR_NAME)
    assert len(alerts) == 2 and alerts[-1].details["message_ids"] == ["9-0"]


def test_unchanged_dlq_is_observed_again_only_after_the_longest_gap(
    redis_client: RedisClient, settings: Settings, make_resources, dagster_instance
) -> None:
    """The Events list shows changes, plus a heartbeat at most every N seconds."""
    resources = make_resources(observation_max_interval_s=2)
    redis_client.xadd(settings.dlq_stream, dead_letter("1-0", "transactions").to_fields())
    first = tick(dead_letter_queue_sensor, dagster_instance, resources, None)
    observed_at = time.time()
    assert depth_observation(first)["depth"] == 1
    settled = tick(dead_letter_queue_sensor, dagster_instance, resources, first.cursor)
    assert depth_observation(settled)["new"] == 0  # "new" went 1 -> 0: a change
    quiet = tick(dead_letter_queue_sensor, dagster_instance, resources, settled.cursor)
    assert not [e for e in quiet.asset_events if isinstance(e, dg.AssetObservation)]
    wait_until(lambda: time.time() - observed_at > 2.5, timeout_s=5)
    later = tick(dead_letter_queue_sensor, dagster_instance, resources, quiet.cursor)
    assert (depth_observation(later)["depth"], depth_observation(later)["new"]) == (1, 0)
