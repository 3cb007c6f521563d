"""Restoring an export with ``sentinel dlq import`` is no new failure: the DLQ sensor does
not alert on the restored entries and the stream's dead-letter check does not count them,
while a dead letter arriving afterwards is still reported."""

from __future__ import annotations

import json
import time
from pathlib import Path

import dagster as dg

from sentinel_platform.domains.operations.dead_letters import SENSOR_NAME, dead_letter_queue_sensor
from sentinel_platform.domains.operations.stream_health import DLQ_WINDOW_S
from sentinel_platform.domains.operations.targets import TRANSACTIONS
from sentinel_platform.schemas import DeadLetter
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform_tests.harness.cli import run_sentinel
from sentinel_platform_tests.harness.operations import read_alerts, tick


def _letter(message_id: str) -> dict[str, str]:
    return DeadLetter(
        stream="transactions",
        group="g",
        message_id=message_id,
        payload=json.dumps({"data": "{"}),
        reason="invalid_message",
        error="bad json",
        deliveries=1,
        consumer="c1",
        dead_lettered_at="2026-01-10T12:00:00+00:00",
    ).to_fields()


def _recent_in_check(data: dg.SensorResult) -> int:
    (check,) = [
        e
        for e in data.asset_events
        if isinstance(e, dg.AssetCheckEvaluation) and e.asset_key == TRANSACTIONS.asset_key
    ]
    return int(check.metadata["recent_dead_letters"].value)


def test_an_imported_export_raises_no_new_dead_letter_alert(
    redis_client: RedisClient,
    settings: Settings,
    settings_env: dict[str, str],
    make_resources,
    dagster_instance,
    tmp_path: Path,
) -> None:
    dlq = settings.dlq_stream
    an_hour_ago_ms = int((time.time() - 4 * DLQ_WINDOW_S) * 1000)
    redis_client.xadd(dlq, _letter("1-0"), id=f"{an_hour_ago_ms}-0")
    resources = make_resources()
    first = tick(dead_letter_queue_sensor, dagster_instance, resources, None)
    assert len(read_alerts(redis_client, settings, SENSOR_NAME)) == 1  # reported once, then

    saved = tmp_path / "dlq.jsonl"
    exported = run_sentinel(settings_env, "dlq", "export", "-o", str(saved), "--delete-exported")
    assert exported.code == 0, exported.err
    emptied = tick(dead_letter_queue_sensor, dagster_instance, resources, first.cursor)
    restored = run_sentinel(settings_env, "dlq", "import", str(saved))
    assert restored.code == 0, restored.err
    assert redis_client.xlen(dlq) == 1

    after = tick(dead_letter_queue_sensor, dagster_instance, resources, emptied.cursor)
    assert "no new dead letters" in after.skip_message
    assert len(read_alerts(redis_client, settings, SENSOR_NAME)) == 1  # still only the first
    assert _recent_in_check(after) == 0  # dead-lettered an hour ago, not in the window

    redis_client.xadd(dlq, _letter("9-0"))
    later = tick(dead_letter_queue_sensor, dagster_instance, resources, after.cursor)
    alerts = read_alerts(redis_client, settings, SENSOR_NAME)
    assert len(alerts) == 2 and alerts[-1].details["message_ids"] == ["9-0"]
    assert alerts[-1].summary.startswith("1 new dead letter(s)")
    assert _recent_in_check(later) == 1
