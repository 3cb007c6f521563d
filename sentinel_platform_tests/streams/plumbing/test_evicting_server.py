"""A worker checks the server's eviction policy at start-up: ``allkeys-*`` is a start-up
error (exit 2) unless accepted by the setting, ``volatile-*`` a warning logged once."""

from __future__ import annotations

from collections.abc import Callable

from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform_tests.harness.processes import StartWorker

REFUSED = 2


def test_worker_refuses_to_start_on_a_server_evicting_any_key(
    start_worker: StartWorker, redis_client: RedisClient, eviction_policy: Callable[[str], None]
) -> None:
    eviction_policy("allkeys-lru")

    worker = start_worker()

    assert worker.wait(timeout_s=30) == REFUSED, worker.text()
    errors = [line for line in worker.text().splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, worker.text()
    for name in ("maxmemory-policy", "allkeys-lru", "noeviction", "SENTINEL_ALLOW_EVICTING_SERVER"):
        assert name in errors[0]
    assert worker.events("startup_failed")
    # Refused before joining: no group, no lease, no stream created.
    assert not redis_client.exists(worker.keys.stream)
    assert not worker.lease_alive(redis_client)


def test_worker_starts_on_an_evicting_server_when_the_risk_is_accepted(
    start_worker: StartWorker, redis_client: RedisClient, eviction_policy: Callable[[str], None]
) -> None:
    eviction_policy("allkeys-lfu")

    worker = start_worker(env={"SENTINEL_ALLOW_EVICTING_SERVER": "true"}).wait_ready(redis_client)

    (warning,) = worker.events("redis_may_evict_keys")
    assert warning["level"] == "warning"
    assert warning["maxmemory_policy"] == "allkeys-lfu" and warning["accepted"] is True


def test_worker_warns_once_on_a_server_evicting_keys_with_a_ttl(
    start_worker: StartWorker, redis_client: RedisClient, eviction_policy: Callable[[str], None]
) -> None:
    eviction_policy("volatile-lru")

    worker = start_worker().wait_ready(redis_client)

    (warning,) = worker.events("redis_may_evict_keys")
    assert warning["level"] == "warning"
    assert warning["maxmemory_policy"] == "volatile-lru" and warning["accepted"] is False
    assert "noeviction" in warning["reason"]
    assert warning["stream"] == worker.keys.stream


def test_worker_on_a_noeviction_server_logs_no_eviction_warning(
    start_worker: StartWorker, redis_client: RedisClient
) -> None:
    worker = start_worker().wait_ready(redis_client)

    assert not worker.events("redis_may_evict_keys")
    (policy,) = worker.events("redis_eviction_policy")
    assert policy["maxmemory_policy"] == "noeviction" and policy["verdict"] == "ok"
