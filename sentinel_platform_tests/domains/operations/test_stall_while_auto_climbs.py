"""A worker raising its in-flight limit is not stalled: the delivery sensor, a real worker.

The user's case: a worker on the default (``auto``) asks a slow analyzer and climbs its
limit against a backlog, so it holds more pending entries at every sensor tick while it
settles hundreds a second. Pending growing over a whole window was enough for the stall
rule to raise an ERROR; the rule now also needs the consumer's oldest pending id to stay.
"""

from __future__ import annotations

import time
from typing import Any

from sentinel_platform.domains.operations.cursor import load_cursor
from sentinel_platform.domains.operations.delivery import SENSOR_NAME, build_delivery_sensor
from sentinel_platform.domains.operations.targets import TRANSACTIONS
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.harness.analyzer_server import AnalyzerServer
from sentinel_platform_tests.harness.operations import read_alerts, tick
from sentinel_platform_tests.harness.processes import Fleet, child_env, wait_leases
from sentinel_platform_tests.harness.streams import sample_transaction

BACKLOG = 3_000
WINDOW = 3


def _grew(window: list[int]) -> bool:
    return len(window) >= WINDOW and window == sorted(window) and window[-1] > window[0]


def test_a_worker_whose_limit_climbs_holds_more_each_tick_and_is_not_stalled(
    fleet: Fleet,
    redis_client: RedisClient,
    settings: Settings,
    analyzer_server: AnalyzerServer,
    make_resources: Any,
    dagster_instance: Any,
) -> None:
    analyzer_server.mode, analyzer_server.delay_s = "slow", 0.3
    keys = transaction_keys(settings)
    env = child_env(settings.redis_url_value, settings.home_dir, analyzer_url=analyzer_server.url)
    worker = fleet.worker("transactions", "climber", env)
    wait_leases(redis_client, keys, [worker], timeout_s=60)
    for n in range(BACKLOG):
        redis_client.xadd(keys.stream, sample_transaction(n).to_fields())
    sensor, resources = build_delivery_sensor([TRANSACTIONS], WINDOW), make_resources()
    cursor, windows = None, []
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(_grew(w) for w in windows):
        cursor = tick(sensor, dagster_instance, resources, cursor).cursor
        windows = list(load_cursor(cursor)["windows"]["transactions"].values())
        time.sleep(0.2)  # a tick's spacing; the loop ends on the condition or the deadline
    assert any(_grew(w) for w in windows), f"pending never grew over a window: {windows}"
    assert redis_client.xlen(keys.results) > 0  # and the worker settled all along
    stalls = [a.summary for a in read_alerts(redis_client, settings, SENSOR_NAME)]
    assert stalls == []
