"""After a long outage, a worker waits one lease TTL before recovering others' messages.

A Redis restored from its AOF after an outage longer than the lease TTL comes back with
every lease expired. The first worker back must leave live workers' in-flight messages
alone until their heartbeats have re-taken their leases.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from sentinel_platform.redis_server import RedisServer
from sentinel_platform.streams.consumer.healing.recovery_grace import (
    RecoveryGrace,
    others_claimable,
)
from sentinel_platform.streams.plumbing.connection import RedisClient, connect
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.harness.processes import StartWorker
from sentinel_platform_tests.harness.processors import CALLS_KEY
from sentinel_platform_tests.harness.streams import pending_of, publish
from sentinel_platform_tests.harness.waits import wait_until

LEASE_TTL_MS = 5000  # the grace: long enough for the resumed worker on a loaded machine
OUTAGE_S = LEASE_TTL_MS / 1000 + 1.0  # every lease restored from the AOF is expired


@pytest.mark.parametrize(
    ("now", "outage_seen", "resumed_at", "claimable"),
    [
        (100.0, False, None, True),  # never saw an outage
        (100.0, True, None, False),  # Redis failed and has not answered since
        (100.0, True, 99.0, False),  # failed again after answering
        (100.0, False, 99.0, False),  # answered 1 s ago, grace is 3 s
        (102.9, False, 100.0, False),
        (103.0, False, 100.0, True),  # the grace has passed
        (500.0, False, 100.0, True),
    ],
)
def test_others_are_claimable_only_after_the_grace_since_redis_answered_again(
    now: float, outage_seen: bool, resumed_at: float | None, claimable: bool
) -> None:
    assert others_claimable(now, outage_seen, resumed_at, grace_s=3.0) is claimable


def test_the_grace_starts_when_redis_answers_after_an_outage() -> None:
    grace = RecoveryGrace(grace_s=3.0)
    grace.reached(10.0)
    assert grace.allows_others(10.0)  # answering without an outage starts nothing
    grace.outage()
    assert not grace.allows_others(50.0)
    grace.reached(60.0)
    assert not grace.allows_others(62.0)
    grace.reached(62.5)  # later answers do not move the start
    assert grace.allows_others(63.0)


@pytest.fixture
def aof_server(redis_binary: str, tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(redis_binary, tmp_path / "aof-redis", config={"appendfsync": "always"})
    yield server.start()
    server.stop()


def _client(server: RedisServer, settings_factory) -> RedisClient:
    return connect(settings_factory(redis_url=server.url))


@pytest.mark.slow
def test_first_worker_back_after_a_long_outage_leaves_live_workers_messages_alone(
    aof_server: RedisServer, redis_binary: str, make_settings, start_worker: StartWorker
) -> None:
    client = _client(aof_server, make_settings)
    env = {"REDIS_URL": aof_server.url, "SENTINEL_LEASE_TTL_MS": str(LEASE_TTL_MS)}
    keys = transaction_keys(make_settings(redis_url=aof_server.url))
    publish(client, keys, [{"key": "slow-1", "sleep_ms": "2500"}, {"key": "slow-2"}])
    busy = start_worker(consumer="busy", env=env, args=["--count", "2"]).wait_ready(client)
    wait_until(lambda: client.hget(CALLS_KEY, "slow-1") == "1", 15)
    assert pending_of(client, keys, "busy") == 2
    idle = start_worker(consumer="idle", env=env).wait_ready(client)
    wait_until(lambda: idle.events("started"), 15)  # fully up before the outage begins

    # The busy worker is alive but its heartbeat comes back late; Redis is down for longer
    # than the lease TTL and comes back from its AOF with both leases expired.
    os.kill(busy.pid, signal.SIGSTOP)
    try:
        aof_server.kill()
        time.sleep(OUTAGE_S)  # the outage itself, the scenario under test
        aof_server.start()
        client = _client(aof_server, make_settings)
        assert not client.exists(keys.lease("busy"))
        wait_until(lambda: idle.events("redis_reachable") or pending_of(client, keys, "idle"), 20)
    finally:
        os.kill(busy.pid, signal.SIGCONT)

    wait_until(lambda: client.xlen(keys.results) >= 2 and pending_of(client, keys, "busy") == 0, 30)
    wait_until(lambda: not client.xpending(keys.stream, keys.group)["pending"], 15)
    calls = client.hgetall(CALLS_KEY)
    assert calls == {"slow-1": "1", "slow-2": "1"}, calls
    assert idle.events("recovered") == []
    assert busy.proc.poll() is None and idle.proc.poll() is None
