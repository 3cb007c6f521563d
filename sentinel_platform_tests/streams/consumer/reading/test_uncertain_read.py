"""A read whose reply is lost is never re-sent; its batch is processed as the first delivery.

XREADGROUP is not safe to re-send: the lost call may have delivered a batch, and a
re-send delivers another while the first sits in the PEL with one delivery counted.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sentinel_platform.redis_server import RedisServer
from sentinel_platform.streams.consumer.group import ensure_group
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.processes import StartWorker
from sentinel_platform_tests.harness.processors import CALLS_KEY
from sentinel_platform_tests.harness.streams import publish
from sentinel_platform_tests.harness.waits import wait_until
from sentinel_platform_tests.streams.consumer.reading.lossy_relay import LossyRelay


@pytest.fixture
def relay(redis_server: RedisServer) -> Iterator[LossyRelay]:
    relay = LossyRelay(redis_server.port)
    yield relay
    relay.close()


def test_a_lost_read_reply_is_processed_once_as_the_first_delivery(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker, relay: LossyRelay
) -> None:
    ensure_group(redis_client, tx_keys)
    keys = [f"m{n}" for n in range(10)]
    publish(redis_client, tx_keys, [{"key": key} for key in keys])
    relay.arm()
    # With a delivery limit of 1 a message counted twice is dead-lettered unprocessed.
    env = {"REDIS_URL": relay.url, "SENTINEL_RECLAIM_DELIVERY_LIMIT": "1"}
    worker = start_worker(env=env)

    wait_until(relay.lost.is_set)
    wait_until(lambda: redis_client.xlen(tx_keys.results) == 10, timeout_s=15)
    wait_until(lambda: redis_client.xpending(tx_keys.stream, tx_keys.group)["pending"] == 0)

    assert redis_client.xlen(tx_keys.dlq) == 0
    assert redis_client.hgetall(CALLS_KEY) == {key: "1" for key in keys}
    assert worker.events("uncertain_read")
    assert worker.proc.poll() is None
