"""The lag sensor's stream observation says how many entries the stream retains."""

from __future__ import annotations

from sentinel_platform.domains.operations.lag_gate import build_lag_sensor
from sentinel_platform.domains.operations.targets import TRANSACTIONS
from sentinel_platform.streams.backlog.lag import write_lag_key
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.operations import observations, tick


def test_stream_observation_records_the_entries_retained(
    redis_client: RedisClient, txn_group: StreamKeys, make_resources, dagster_instance, clock
) -> None:
    keys = txn_group
    for n in range(7):
        redis_client.xadd(keys.stream, {"data": f'{{"n": {n}}}'})
    write_lag_key(redis_client, keys, 7, ttl_s=10)
    sensor = build_lag_sensor([TRANSACTIONS], clock=clock)

    data = tick(sensor, dagster_instance, make_resources(lag_warn=50, lag_pause=100), None)

    (obs,) = observations(data, TRANSACTIONS.asset_key)
    assert obs["entries_retained"] == 7
