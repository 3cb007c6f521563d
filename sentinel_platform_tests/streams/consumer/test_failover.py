"""Workers ride through a replica promotion behind their address: no crash, nothing lost.

A primary with a replica (``replicaof``), reached through a relay (a stable address, as a
virtual IP or a service name would be). Mid-stream the primary hands over with
``FAILOVER``: the replica becomes the primary, the old primary becomes its replica, and
the relay sends new connections to the new primary. The workers' kept connections now
answer READONLY; they must drop them, reconnect and carry on with their outcomes kept.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from sentinel_platform.redis_server import RedisServer
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.harness.processes import StartWorker
from sentinel_platform_tests.harness.relay import Relay
from sentinel_platform_tests.harness.streams import publish
from sentinel_platform_tests.harness.waits import wait_until

pytestmark = pytest.mark.slow

BEFORE, AFTER = 300, 300


@pytest.fixture
def primary_and_replica(
    redis_binary: str, tmp_path: Path
) -> Iterator[tuple[RedisServer, RedisServer]]:
    primary = RedisServer(redis_binary, tmp_path / "primary").start()
    replica = RedisServer(
        redis_binary, tmp_path / "replica", config={"replicaof": f"127.0.0.1 {primary.port}"}
    ).start()
    yield primary, replica
    replica.stop()
    primary.stop()


def _client(server: RedisServer) -> redis.Redis:
    return redis.Redis(port=server.port, decode_responses=True, socket_timeout=10)


def _role(server: RedisServer) -> str:
    return str(_client(server).info("replication")["role"])


def test_workers_ride_through_a_replica_promotion_behind_their_address(
    primary_and_replica: tuple[RedisServer, RedisServer],
    make_settings,
    start_worker: StartWorker,
) -> None:
    primary, replica = primary_and_replica
    old, new = _client(primary), _client(replica)
    wait_until(lambda: new.info("replication")["master_link_status"] == "up", 15)
    relay = Relay(primary.port).start()
    keys = transaction_keys(make_settings(redis_url=relay.url))
    env = {"REDIS_URL": relay.url}
    workers = [start_worker(env=env).wait_ready(old) for _ in range(2)]
    publish(old, keys, [{"key": f"a{n}", "sleep_ms": "5"} for n in range(BEFORE)])
    wait_until(lambda: old.xlen(keys.results) >= BEFORE // 4, 30)

    # Mid-stream: coordinated hand-over, then the address points at the new primary.
    old.execute_command("FAILOVER", "TO", "127.0.0.1", replica.port, "TIMEOUT", 5000)
    wait_until(lambda: _role(replica) == "master" and _role(primary) == "slave", 15)
    relay.switch(replica.port)
    publish(new, keys, [{"key": f"b{n}", "sleep_ms": "5"} for n in range(AFTER)])

    try:
        wait_until(lambda: new.xlen(keys.results) >= BEFORE + AFTER, 60)
        wait_until(lambda: not new.xpending(keys.stream, keys.group)["pending"], 30)
    finally:
        alive = [w.proc.poll() is None for w in workers]
        relay.stop()
    results = Counter(fields["key"] for _id, fields in new.xrange(keys.results))
    expected = {f"a{n}" for n in range(BEFORE)} | {f"b{n}" for n in range(AFTER)}
    assert set(results) == expected  # nothing lost
    assert max(results.values()) == 1  # nothing applied twice
    assert not new.exists(keys.dlq)
    assert alive == [True, True]  # no crash, no restart
    # The demoted primary really refused the workers' writes.
    assert int(old.info("errorstats").get("errorstat_READONLY", {}).get("count", 0)) > 0
