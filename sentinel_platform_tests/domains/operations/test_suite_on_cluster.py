"""The operations suite (sensors, stream-health checks, alerts) against the Redis Cluster.

The imported tests are the operations suite's own functions; this module's
``make_settings`` (imported below) points their fixtures at the cluster. Its dead-letter
tests are not imported: their helper writes to the single-server DLQ name
(``settings.dlq_stream``), which a cluster deployment does not use. The DLQ sensor is
proven here instead with dead letters in both per-stream DLQs.
"""

from __future__ import annotations

from typing import Any

import pytest

from sentinel_platform.domains.operations.dead_letters import SENSOR_NAME, dead_letter_queue_sensor
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import axiom_keys, transaction_keys
from sentinel_platform_tests.domains.operations.test_alerting import (
    test_alert_stream_is_capped,
    test_cooldown_suppresses_repeats_across_restarts_unless_severity_worsens,
    test_webhook_receives_slack_text_payload,
)
from sentinel_platform_tests.domains.operations.test_checks import (
    test_delivery_check_fails_with_figures_when_messages_are_orphaned,
    test_lag_check_passes_warns_and_fails_at_thresholds,
)
from sentinel_platform_tests.domains.operations.test_dead_letters import dead_letter
from sentinel_platform_tests.domains.operations.test_delivery import (
    test_consumer_whose_pending_only_grows_is_reported_stalled_after_a_window,
    test_healthy_pipeline_raises_no_anomaly_alert,
    test_message_held_by_consumer_without_lease_raises_orphan_alert,
    test_message_idle_past_reclaim_raises_alert,
    test_message_one_delivery_from_limit_raises_alert,
)
from sentinel_platform_tests.domains.operations.test_lag_gate import (
    test_expired_lag_key_with_a_live_lease_is_judged_on_the_group_not_worker_off,
    test_lag_check_evaluated_every_tick_with_severity_by_zone,
    test_lag_through_warn_and_pause_pauses_then_resumes_held_partition_once,
    test_no_live_worker_pauses_publishing_and_holds_due_partitions,
    test_operator_pause_flag_is_left_in_place,
    test_pause_flag_set_by_the_sensor_is_cleared_even_after_a_lost_cursor,
    test_publish_run_that_failed_during_a_pause_is_relaunched_once_on_resume,
)
from sentinel_platform_tests.domains.operations.test_run_failures import (
    test_failed_publish_run_raises_alert,
)
from sentinel_platform_tests.harness.operations import read_alerts, tick
from sentinel_platform_tests.harness.suite_on_cluster import make_settings

pytestmark = pytest.mark.cluster

__all__ = [
    "make_settings",
    "test_alert_stream_is_capped",
    "test_consumer_whose_pending_only_grows_is_reported_stalled_after_a_window",
    "test_cooldown_suppresses_repeats_across_restarts_unless_severity_worsens",
    "test_delivery_check_fails_with_figures_when_messages_are_orphaned",
    "test_expired_lag_key_with_a_live_lease_is_judged_on_the_group_not_worker_off",
    "test_failed_publish_run_raises_alert",
    "test_healthy_pipeline_raises_no_anomaly_alert",
    "test_lag_check_evaluated_every_tick_with_severity_by_zone",
    "test_lag_check_passes_warns_and_fails_at_thresholds",
    "test_lag_through_warn_and_pause_pauses_then_resumes_held_partition_once",
    "test_message_held_by_consumer_without_lease_raises_orphan_alert",
    "test_message_idle_past_reclaim_raises_alert",
    "test_message_one_delivery_from_limit_raises_alert",
    "test_no_live_worker_pauses_publishing_and_holds_due_partitions",
    "test_operator_pause_flag_is_left_in_place",
    "test_pause_flag_set_by_the_sensor_is_cleared_even_after_a_lost_cursor",
    "test_publish_run_that_failed_during_a_pause_is_relaunched_once_on_resume",
    "test_webhook_receives_slack_text_payload",
]


def test_dead_letter_sensor_reads_every_per_stream_dlq_of_the_cluster(
    redis_client: RedisClient, settings: Settings, make_resources: Any, dagster_instance: Any
) -> None:
    tx, ax = transaction_keys(settings), axiom_keys(settings)
    assert tx.dlq != ax.dlq
    resources = make_resources()
    empty = tick(dead_letter_queue_sensor, dagster_instance, resources, None)
    assert "no new dead letters" in empty.skip_message

    redis_client.xadd(tx.dlq, dead_letter("1-0", tx.stream).to_fields())
    redis_client.xadd(tx.dlq, dead_letter("2-0", tx.stream, error="amount < 0").to_fields())
    redis_client.xadd(ax.dlq, dead_letter("3-0", ax.stream, "max_deliveries_exceeded").to_fields())
    first = tick(dead_letter_queue_sensor, dagster_instance, resources, empty.cursor)

    (alert,) = read_alerts(redis_client, settings, SENSOR_NAME)
    assert alert.details["by_stream"] == {tx.stream: 2, ax.stream: 1}
    assert sorted(alert.details["message_ids"]) == ["1-0", "2-0", "3-0"]
    assert alert.details["dlq_depth"] == 3

    again = tick(dead_letter_queue_sensor, dagster_instance, make_resources(), first.cursor)
    assert "no new dead letters" in again.skip_message
    assert len(read_alerts(redis_client, settings, SENSOR_NAME)) == 1
