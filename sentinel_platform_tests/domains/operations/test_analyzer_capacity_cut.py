"""AI capacity is backpressure up to Spark: the analyzer's capacity cut mid-run.

A real worker process on the defaults (``SENTINEL_WORKER_CONCURRENCY=auto``, the domain
processor asking a real HTTP analyzer: the harness's stub, 50 ms a call, 32 at once and
429 + ``Retry-After`` beyond, served from a process of its own like a real API), the real
publisher resource publishing a partition from Spark with the default limits, and the
real lag sensor ticking all along. Midway the analyzer's capacity is cut from 32 to 4: the
worker's limit follows it down (its holding, the pool's in-flight allowance, with it), the
drain rate falls, the producer paces to the new rate, and nothing is lost, decided by the
rules, dead-lettered or raised as an alarm.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import timedelta
from typing import Any

import pytest

from sentinel_platform.domains.operations.lag_gate import build_lag_sensor
from sentinel_platform.domains.operations.targets import TRANSACTIONS
from sentinel_platform.resources.redis_publisher import RedisPublisherResource
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.holdings import read_allowance
from sentinel_platform.streams.backlog.lag import measure_lag
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform.streams.producer.publish import PublishStats
from sentinel_platform_tests.harness.analyzer_stub_process import stub_in_own_process
from sentinel_platform_tests.harness.operations import observations, read_alerts, tick
from sentinel_platform_tests.harness.spark_frames import transaction_frame
from sentinel_platform_tests.harness.waits import wait_until

pytestmark = [pytest.mark.spark, pytest.mark.timeout(600)]  # Spark + a worker, loaded CI
ROWS = 1_000
#: The cut comes once this many verdicts are in.
CUT_AFTER = 200


def _partition(spark: Any) -> Any:
    """One partition of valid transactions, each sent to the analyzer (amount 497)."""
    return transaction_frame(spark, ROWS, "txn-cut-%08d", 497.0)


def test_a_capacity_cut_mid_run_slows_the_producer_and_costs_no_ai_verdict(
    spark: Any,
    redis_client: RedisClient,
    txn_group: StreamKeys,
    settings: Settings,
    make_resources: Any,
    dagster_instance: Any,
    clock: Any,
    start_worker: Any,
) -> None:
    keys = txn_group
    frame = _partition(spark).cache()
    assert frame.count() == ROWS  # built before the clock starts
    with stub_in_own_process(0.05, capacity=32, mode="reject", retry_after="1") as stub:
        env = {"SENTINEL_ANALYZER_URL": stub.url, "SENTINEL_WORKER_CONCURRENCY": "auto"}
        worker = start_worker(processor=None, env=env)  # the domain processor, auto
        worker.wait_ready(redis_client)
        resources = make_resources()  # no lag limits set: the defaults
        sensor = build_lag_sensor([TRANSACTIONS], clock=clock)
        cursor = tick(sensor, dagster_instance, resources, None).cursor
        published: list[PublishStats] = []
        failed: list[BaseException] = []
        done = threading.Event()

        def publish() -> None:
            try:
                publisher = RedisPublisherResource(redis_url=settings.redis_url_value)
                published.append(publisher.publish_dataframe(frame, "transactions"))
            except BaseException as exc:  # re-raised below, in the test's thread
                failed.append(exc)
            finally:
                done.set()

        thread = threading.Thread(target=publish, daemon=True)
        thread.start()
        recorded: list[dict[str, Any]] = []
        allowances: list[int] = []
        cut_at: float | None = None
        while not done.wait(0.5):  # the sensor ticks all along the publish
            if cut_at is None and redis_client.xlen(keys.results) >= CUT_AFTER:
                stub.set_capacity(4)
                cut_at = time.monotonic()
            if cut_at is not None:
                allowances.append(read_allowance(redis_client, keys))
            clock.now += timedelta(seconds=15)
            data = tick(sensor, dagster_instance, resources, cursor)
            cursor = data.cursor
            recorded.extend(observations(data, TRANSACTIONS.asset_key))
        thread.join(timeout=60)
        assert not failed, failed
        assert cut_at is not None, "the publish ended before the cut"
        wait_until(lambda: measure_lag(redis_client, keys).lag == 0, 120, what="drained")
        assert worker.stop() == 0, worker.log_tail()
        counters = stub.counters()

    (stats,) = published
    assert stats.rows == ROWS
    verdicts = [fields for _id, fields in redis_client.xrange(keys.results)]
    assert len({v["txn_id"] for v in verdicts}) == ROWS  # nothing lost
    assert {v["driver_used"] for v in verdicts} == {"analyzer"}  # 0 rules verdicts
    assert redis_client.xlen(keys.dlq) == 0
    assert counters["peak_serving"] > 4  # it ran beyond the new capacity before the cut
    assert min(allowances) <= 8, allowances  # the limit, and the allowance, followed it down
    assert stats.slowed_s > 0 or stats.soft_events > 0, stats  # the producer paced
    loud = [a for a in read_alerts(redis_client, settings) if a.severity in ("warning", "error")]
    assert not loud, [a.summary for a in loud]  # no false alarm
    assert stats.hard_events == 0 and stats.paused_s == 0
    assert "backpressure" not in {obs["zone"] for obs in recorded}
    assert json.dumps(recorded)  # the observations are plain data
