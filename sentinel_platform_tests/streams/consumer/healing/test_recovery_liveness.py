"""Recovery at connection close: a SIGKILLed worker's messages are claimed as soon as its
registered connection is gone, long before its lease could expire; a live worker (slow,
or whose connection blips and reconnects) is never robbed."""

from __future__ import annotations

import threading
import time
from typing import Any

from redis.cluster import RedisCluster

from sentinel_platform.streams.consumer.group import ensure_group
from sentinel_platform.streams.consumer.healing.liveness import Registration, registration_key
from sentinel_platform.streams.consumer.healing.recovery import CLAIM
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, attempt_key
from sentinel_platform_tests.harness.processes import NOOP_PROCESSOR, StartWorker, WorkerProcess
from sentinel_platform_tests.harness.processors import CALLS_KEY
from sentinel_platform_tests.harness.streams import pending_of, publish
from sentinel_platform_tests.harness.waits import wait_until

#: Long enough that a claim seen before it ran out cannot have come from the lease rule.
LONG_LEASE = {"SENTINEL_LEASE_TTL_MS": "30000", "SENTINEL_LAG_KEY_TTL_S": "30"}


def _registration(client: RedisClient, keys: StreamKeys, worker: WorkerProcess) -> Registration:
    raw = client.get(registration_key(keys, worker.consumer))
    registration = Registration.decode(raw)
    assert registration is not None, f"{worker.consumer} registered no connection"
    return registration


def _kill_connection(
    client: RedisClient, keys: StreamKeys, worker: WorkerProcess, client_id: int
) -> None:
    """``CLIENT KILL ID`` on the node where the worker registered (a cluster's key owner)."""
    untyped: Any = client
    if isinstance(client, RedisCluster):
        node = untyped.get_node_from_key(registration_key(keys, worker.consumer))
        untyped.execute_command("CLIENT KILL", "ID", client_id, target_nodes=node)
    else:
        untyped.execute_command("CLIENT KILL", "ID", client_id)


def test_a_killed_workers_messages_are_claimed_at_connection_close_before_its_lease_expires(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    publish(redis_client, tx_keys, [{"key": f"m{n}"} for n in range(5)])
    victim = start_worker(env=LONG_LEASE, args=["--count", "5", "--simulate-latency-ms", "600000"])
    wait_until(lambda: pending_of(redis_client, tx_keys, victim.consumer) == 5)
    wait_until(lambda: redis_client.get(registration_key(tx_keys, victim.consumer)))
    survivor = start_worker(env=LONG_LEASE).wait_ready(redis_client)
    wait_until(lambda: redis_client.get(registration_key(tx_keys, survivor.consumer)))

    victim.kill()
    wait_until(lambda: redis_client.xlen(tx_keys.results) == 5, 20)

    # The victim's lease is still there: the claim came from its closed connection.
    assert redis_client.pttl(tx_keys.lease(victim.consumer)) > 0
    assert {f["key"] for _, f in redis_client.xrange(tx_keys.results)} == {
        f"m{n}" for n in range(5)
    }
    assert {e["claimed_from"] for e in survivor.events("recovered")} == {victim.consumer}
    [disconnected] = survivor.events("holder_disconnected")
    assert disconnected["holder"] == victim.consumer
    assert redis_client.hgetall(CALLS_KEY) == {f"m{n}": "1" for n in range(5)}


def test_a_slow_live_worker_is_never_robbed_with_service_time_ten_times_the_lease(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    # A 1 s lease (heartbeat every ~0.33 s) rides out a stall on a loaded machine. The call
    # lasts ten lease TTLs; meanwhile slow1, read in the same batch, waits as long in the PEL.
    env = {"SENTINEL_LEASE_TTL_MS": "1000", "SENTINEL_RECLAIM_IDLE_MS": "1000"}
    publish(redis_client, tx_keys, [{"key": "slow0", "sleep_ms": "10000"}, {"key": "slow1"}])
    slow = start_worker(env=env, args=["--count", "2"]).wait_ready(redis_client)
    wait_until(lambda: pending_of(redis_client, tx_keys, slow.consumer) == 2)
    survivor = start_worker(env=env).wait_ready(redis_client)

    wait_until(lambda: redis_client.xlen(tx_keys.results) == 2, 30)
    time.sleep(0.5)  # a late thief would show up as a second call
    assert redis_client.hgetall(CALLS_KEY) == {"slow0": "1", "slow1": "1"}
    assert not survivor.events("recovered")
    assert not survivor.events("holder_disconnected")
    # The survivor did look at the slow worker's connection (it was registered).
    assert _registration(redis_client, tx_keys, slow).client_id > 0


def test_a_connection_that_drops_and_reconnects_is_not_taken_as_death(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    publish(redis_client, tx_keys, [{"key": f"b{n}", "sleep_ms": "1500"} for n in range(3)])
    holder = start_worker(env=LONG_LEASE, args=["--count", "3"]).wait_ready(redis_client)
    wait_until(lambda: pending_of(redis_client, tx_keys, holder.consumer) == 3)
    survivor = start_worker(env=LONG_LEASE).wait_ready(redis_client)
    first = _registration(redis_client, tx_keys, holder)

    # Blips in a burst: the holder's registered connection is killed again and again,
    # so survivors often look while the registered id is gone.
    ids_seen: set[int] = set()
    stop = threading.Event()

    def blips() -> None:
        while not stop.is_set():
            registration = Registration.decode(
                redis_client.get(registration_key(tx_keys, holder.consumer))
            )
            if registration is not None:
                ids_seen.add(registration.client_id)
                _kill_connection(redis_client, tx_keys, holder, registration.client_id)
            time.sleep(0.01)

    killer = threading.Thread(target=blips)
    killer.start()
    try:
        time.sleep(2.5)
    finally:
        stop.set()
        killer.join()

    wait_until(lambda: redis_client.xlen(tx_keys.results) == 3, 20)
    assert len(ids_seen) > 5, "the holder did not reconnect and re-register"
    assert _registration(redis_client, tx_keys, holder).client_id != first.client_id
    assert redis_client.hgetall(CALLS_KEY) == {f"b{n}": "1" for n in range(3)}
    assert not survivor.events("recovered")
    assert holder.proc.poll() is None


#: The README's least-privilege user, which leaves out ``CLIENT LIST`` (``-@dangerous``).
ACL_WITHOUT_CLIENT_LIST = (
    "~transactions", "~synapse:*", "~sentinel:*", "~{*}*", "-@all", "+@stream", "+@string",
    "+@hash", "+@list", "+@sortedset", "+@keyspace", "+@scripting", "+@connection",
    "+@transaction", "-@dangerous", "+info",
)  # fmt: skip


def test_without_client_list_permission_the_lease_ttl_decides_and_it_is_logged_once(
    redis_client: RedisClient,
    tx_keys: StreamKeys,
    start_worker: StartWorker,
    worker_env: dict[str, str],
) -> None:
    redis_client.execute_command(
        "ACL", "SETUSER", "limited", "reset", "on", ">limited-Pw-4e1", *ACL_WITHOUT_CLIENT_LIST
    )
    url = worker_env["REDIS_URL"].replace("redis://", "redis://limited:limited-Pw-4e1@", 1)
    env = {"REDIS_URL": url, "SENTINEL_LEASE_TTL_MS": "3000"}
    publish(redis_client, tx_keys, [{"key": f"p{n}"} for n in range(3)])
    victim = start_worker(
        processor=NOOP_PROCESSOR,  # the counting one writes a key outside the platform's
        env=env,
        args=["--count", "3", "--simulate-latency-ms", "600000"],
    )
    wait_until(lambda: pending_of(redis_client, tx_keys, victim.consumer) == 3)
    wait_until(lambda: redis_client.get(registration_key(tx_keys, victim.consumer)))
    survivor = start_worker(processor=NOOP_PROCESSOR, env=env).wait_ready(redis_client)
    wait_until(lambda: survivor.events("liveness_probe_unavailable"), 10)

    victim.kill()
    wait_until(lambda: redis_client.xlen(tx_keys.results) == 3, 20)

    # Recovered by the lease rule: the victim's lease had run out by then.
    assert not redis_client.exists(tx_keys.lease(victim.consumer))
    assert not survivor.events("holder_disconnected")
    assert {e["claimed_from"] for e in survivor.events("recovered")} == {victim.consumer}
    assert len(survivor.events("liveness_probe_unavailable")) == 1
    assert "limited-Pw-4e1" not in survivor.text()


def test_a_claim_at_zero_idle_never_takes_messages_another_survivor_already_claimed(
    redis_client: RedisClient, tx_keys: StreamKeys
) -> None:
    ensure_group(redis_client, tx_keys)
    ids = publish(redis_client, tx_keys, [{"key": f"c{n}"} for n in range(4)])
    redis_client.xreadgroup(tx_keys.group, "dead-one", {tx_keys.stream: ">"}, count=4)
    # Survivor A took two of the dead holder's messages since B listed them.
    redis_client.xclaim(tx_keys.stream, tx_keys.group, "survivor-a", 0, ids[:2])

    def claim(claimer: str) -> list[str]:
        attempt_keys = [attempt_key(tx_keys, message_id) for message_id in ids]
        reply = CLAIM.run(
            redis_client,
            [tx_keys.stream, tx_keys.lease(claimer), tx_keys.lease("dead-one"), *attempt_keys],
            [tx_keys.group, claimer, 0, "", "dead-one", "", *ids],
        )
        return [entry[0] for entry in reply[0]]

    assert claim("survivor-b") == ids[2:]
    assert pending_of(redis_client, tx_keys, "survivor-a") == 2
    assert pending_of(redis_client, tx_keys, "survivor-b") == 2
    assert claim("survivor-c") == []


def test_a_claim_judged_on_a_dead_holders_lease_takes_nothing_once_a_restart_took_the_name(
    redis_client: RedisClient, tx_keys: StreamKeys
) -> None:
    """A survivor judges a holder dead on the lease it read; a worker restarted under the
    name may take that lease over (``lease_takeover.py``) and read new messages before the
    survivor's claim runs: they are the restart's, and the claim leaves them alone."""
    ensure_group(redis_client, tx_keys)
    ids = publish(redis_client, tx_keys, [{"key": f"r{n}"} for n in range(3)])
    redis_client.xreadgroup(tx_keys.group, "slot-1", {tx_keys.stream: ">"}, count=3)

    def claim(judged: str) -> list[str]:
        attempt_keys = [attempt_key(tx_keys, message_id) for message_id in ids]
        reply = CLAIM.run(
            redis_client,
            [tx_keys.stream, tx_keys.lease("survivor"), tx_keys.lease("slot-1"), *attempt_keys],
            [tx_keys.group, "survivor", 0, "", "slot-1", judged, *ids],
        )
        return [entry[0] for entry in reply[0]]

    redis_client.set(tx_keys.lease("slot-1"), "host:2:restart")  # taken over since
    assert claim("host:1:dead") == []  # judged on the dead holder's lease
    assert claim("") == []  # judged with no lease: a restart took a fresh one
    assert pending_of(redis_client, tx_keys, "slot-1") == 3
    redis_client.delete(tx_keys.lease("slot-1"))
    assert claim("") == ids  # still no lease: the dead holder's messages are claimed
    assert pending_of(redis_client, tx_keys, "survivor") == 3
