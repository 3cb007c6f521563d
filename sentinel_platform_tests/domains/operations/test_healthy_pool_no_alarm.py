"""A healthy pool on the defaults raises no alarm: the issue's repro, in real processes.

One real worker process with every default (one worker, reads of 100, concurrency 1),
the real publisher resource publishing a partition from Spark with the default limits,
and the real lag sensor ticking all along. A pool that keeps up must see no pause flag,
no hard backpressure episode and no WARN or ERROR alert.
"""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from typing import Any

import pytest

from sentinel_platform.domains.operations.lag_gate import build_lag_sensor
from sentinel_platform.domains.operations.targets import TRANSACTIONS
from sentinel_platform.resources.redis_publisher import RedisPublisherResource
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.lag import measure_lag
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, drain_rate_key
from sentinel_platform.streams.producer.publish import PublishStats
from sentinel_platform_tests.harness.operations import observations, read_alerts, tick
from sentinel_platform_tests.harness.spark_frames import transaction_frame
from sentinel_platform_tests.harness.waits import wait_until

pytestmark = pytest.mark.spark
ROWS = 20_000


def _partition(spark: Any) -> Any:
    """One partition of valid transactions, built by Spark in two Spark partitions."""
    return transaction_frame(spark, ROWS, "txn-20261121-%08d")


def test_healthy_default_pool_publishing_a_partition_raises_no_alert(
    spark: Any,
    redis_client: RedisClient,
    txn_group: StreamKeys,
    settings: Settings,
    settings_env: dict[str, str],
    make_resources: Any,
    dagster_instance: Any,
    clock: Any,
    start_worker: Any,
) -> None:
    keys = txn_group
    frame = _partition(spark).cache()
    assert frame.count() == ROWS  # built before the clock starts
    worker = start_worker(processor=None)  # the domain processor, every default
    worker.wait_ready(redis_client)
    resources = make_resources()  # no lag limits set: the defaults
    sensor = build_lag_sensor([TRANSACTIONS], clock=clock)
    cursor = tick(sensor, dagster_instance, resources, None).cursor

    published: list[PublishStats] = []
    failed: list[BaseException] = []
    paused_seen = threading.Event()
    done = threading.Event()

    def publish() -> None:
        try:
            publisher = RedisPublisherResource(redis_url=settings.redis_url_value)
            published.append(publisher.publish_dataframe(frame, "transactions"))
        except BaseException as exc:  # re-raised below, in the test's thread
            failed.append(exc)
        finally:
            done.set()

    def watch_pause_flag() -> None:
        while not done.is_set():
            if redis_client.exists(keys.paused):
                paused_seen.set()
            time.sleep(0.005)

    threads = [threading.Thread(target=f, daemon=True) for f in (publish, watch_pause_flag)]
    for thread in threads:
        thread.start()
    recorded: list[dict[str, Any]] = []
    while not done.wait(0.2):  # the sensor ticks all along the publish
        clock.now += timedelta(seconds=15)
        data = tick(sensor, dagster_instance, resources, cursor)
        cursor = data.cursor
        recorded.extend(observations(data, TRANSACTIONS.asset_key))
    for thread in threads:
        thread.join(timeout=30)
    assert not failed, failed
    (stats,) = published
    assert stats.rows == ROWS

    wait_until(lambda: measure_lag(redis_client, keys).lag == 0, timeout_s=60)
    for _ in range(2):  # the peaks since the last tick, then the calm after them
        clock.now += timedelta(seconds=15)
        data = tick(sensor, dagster_instance, resources, cursor)
        cursor = data.cursor
        recorded.extend(observations(data, TRANSACTIONS.asset_key))

    loud = [a for a in read_alerts(redis_client, settings) if a.severity in ("warning", "error")]
    assert not loud, [a.summary for a in loud]
    assert not paused_seen.is_set(), "the producers were paused"
    assert stats.hard_events == 0 and stats.paused_s == 0
    # Paced (elevated) is the controller holding the producer at its set point, which a
    # healthy pool on a loaded machine may briefly need; never backpressure or worker_off.
    quiet = {"nominal", "elevated"}
    assert {obs["zone"] for obs in recorded} <= quiet
    assert {obs["peak_zone"] for obs in recorded} <= quiet
    assert "nominal" in {obs["zone"] for obs in recorded}
    # The observations show the lag and the seconds of work, at the measured drain rate.
    assert redis_client.get(drain_rate_key(keys)) is not None
    # (an idle tick, nothing pending, records no drain rate at all)
    measured = [obs for obs in recorded if obs.get("drain_rate_per_s")]
    assert measured and all("work_s" in obs and "lag" in obs for obs in measured)
