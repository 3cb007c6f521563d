"""Starting, healing and stopping while Redis answers with errors.

Redis can refuse commands for long stretches without being down: a key of the wrong type,
a server full under ``noeviction`` (OOM), a group deleted under the worker (NOGROUP).
A real worker process must never leave on a traceback for any of them:

* stopping while its commits are refused, it gives up on what it cannot commit after
  ``SENTINEL_SHUTDOWN_TIMEOUT_S``, releases its lease, logs one line and exits with
  :data:`EXIT_UNCOMMITTED`; what it could not commit stays pending for the survivors;
* started against a full server, it waits like for an outage (``redis_error``), can still
  be stopped, and starts consuming once the server has room;
* a group deleted while the server is full cannot be recreated at once: healing waits
  like for an outage instead of killing the worker;
* only a refusal no wait can change (an ACL denying a command it needs) ends start-up,
  with one line and exit status 2.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from sentinel_platform.exit_codes import EXIT_UNCOMMITTED, EXIT_USAGE
from sentinel_platform.redis_server import RedisServer
from sentinel_platform.settings import load_settings
from sentinel_platform.streams.plumbing.connection import RedisClient, connect
from sentinel_platform.streams.plumbing.keys import StreamKeys, transaction_keys
from sentinel_platform_tests.harness.processes import NOOP_PROCESSOR, StartWorker, WorkerProcess
from sentinel_platform_tests.harness.processors import CALLS_KEY
from sentinel_platform_tests.harness.streams import pending_of, publish
from sentinel_platform_tests.harness.waits import wait_until

SHUTDOWN_TIMEOUT_S = 2.0


@dataclass
class FullableServer:
    """A server of the test's own (``noeviction``), so filling it up touches no other test."""

    url: str
    client: RedisClient
    keys: StreamKeys

    def fill(self) -> None:
        self.client.config_set("maxmemory", 1)  # every write that may grow memory: OOM

    def make_room(self) -> None:
        self.client.config_set("maxmemory", 0)


@pytest.fixture
def own_server(redis_binary: str, tmp_path: Path) -> Iterator[FullableServer]:
    server = RedisServer(
        redis_binary, tmp_path / "own-redis", config={"maxmemory-policy": "noeviction"}
    ).start()
    settings = load_settings(redis_url=server.url, home=tmp_path / "home")
    client = connect(settings)
    try:
        yield FullableServer(server.url, client, transaction_keys(settings))
    finally:
        client.close()
        server.stop()


def _refused_for_memory(worker: WorkerProcess) -> list[dict[str, object]]:
    """The worker's ``redis_error`` lines about a full server (it must still be running)."""
    if worker.proc.poll() is not None:
        raise AssertionError(f"worker exited with {worker.proc.returncode}:\n{worker.text()}")
    return [e for e in worker.events("redis_error") if "maxmemory" in str(e["error"])]


def _results_of(client: RedisClient, keys: StreamKeys) -> list[str]:
    return [fields["source_message_id"] for _id, fields in client.xrange(keys.results)]


def test_sigterm_while_commits_are_refused_gives_up_after_the_deadline_and_keeps_them_pending(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    redis_client.set(tx_keys.results, "not a stream")  # every commit: WRONGTYPE
    ids = publish(redis_client, tx_keys, [{"key": f"m{n}"} for n in range(3)])
    env = {"SENTINEL_SHUTDOWN_TIMEOUT_S": str(SHUTDOWN_TIMEOUT_S)}
    worker = start_worker(env=env).wait_ready(redis_client)
    wait_until(lambda: redis_client.hlen(CALLS_KEY) == 3, 30)  # all three processed
    wait_until(lambda: worker.events("redis_error"), 30)  # and their commit refused

    worker.terminate()
    asked = time.monotonic()
    assert worker.wait(SHUTDOWN_TIMEOUT_S + 10) == EXIT_UNCOMMITTED, worker.text()[-4000:]
    # the deadline, plus at most one read block and the process exit
    assert time.monotonic() - asked < SHUTDOWN_TIMEOUT_S + 3
    assert "Traceback" not in worker.text()
    [gave_up] = worker.events("stopped_uncommitted")
    assert "WRONGTYPE" in gave_up["error"] and gave_up["left"] == 3
    assert not worker.lease_alive(redis_client)
    assert pending_of(redis_client, tx_keys, worker.consumer) == 3
    assert redis_client.type(tx_keys.results) == "string"  # nothing half-applied

    # Repaired, a survivor recovers them (the stopped consumer has no lease) exactly once.
    redis_client.delete(tx_keys.results)
    survivor = start_worker().wait_ready(redis_client)
    wait_until(lambda: len(_results_of(redis_client, tx_keys)) == 3, 15)
    assert sorted(_results_of(redis_client, tx_keys)) == sorted(ids)
    wait_until(lambda: redis_client.xpending(tx_keys.stream, tx_keys.group)["pending"] == 0)
    assert survivor.events("duplicate_ack") == []


def test_a_worker_started_on_a_full_server_waits_for_room_then_consumes(
    own_server: FullableServer, start_worker: StartWorker
) -> None:
    client, keys = own_server.client, own_server.keys
    ids = publish(client, keys, [{"key": "a"}, {"key": "b"}])
    own_server.fill()
    worker = start_worker(env={"REDIS_URL": own_server.url}, processor=NOOP_PROCESSOR)

    wait_until(lambda: len(_refused_for_memory(worker)) >= 2, 15)  # retried, with backoff
    assert worker.proc.poll() is None, worker.text()[-4000:]
    assert not worker.events("started")

    own_server.make_room()
    worker.wait_ready(client)
    wait_until(lambda: len(_results_of(client, keys)) == 2, 15)
    assert sorted(_results_of(client, keys)) == sorted(ids)
    assert worker.proc.poll() is None
    assert "Traceback" not in worker.text()


def test_a_worker_waiting_for_room_at_start_still_stops_at_once(
    own_server: FullableServer, start_worker: StartWorker
) -> None:
    own_server.fill()
    worker = start_worker(env={"REDIS_URL": own_server.url}, processor=NOOP_PROCESSOR)
    wait_until(lambda: _refused_for_memory(worker), 15)

    worker.terminate()
    asked = time.monotonic()
    assert worker.wait(10) == 0, worker.text()[-4000:]
    # room for a loaded machine; a wait that ignored the stop could last the 5 s backoff cap
    assert time.monotonic() - asked < 4
    assert "Traceback" not in worker.text()
    assert not own_server.client.keys("sentinel:lease:*")


def test_a_group_deleted_while_the_server_is_full_is_healed_once_there_is_room(
    own_server: FullableServer, start_worker: StartWorker
) -> None:
    client, keys = own_server.client, own_server.keys
    worker = start_worker(env={"REDIS_URL": own_server.url}, processor=NOOP_PROCESSOR)
    worker.wait_ready(client)
    # Frozen, so the group is gone and the server full before the worker looks again.
    os.kill(worker.pid, signal.SIGSTOP)
    own_server.fill()
    client.xgroup_destroy(keys.stream, keys.group)
    os.kill(worker.pid, signal.SIGCONT)

    wait_until(lambda: worker.events("group_missing") and _refused_for_memory(worker), 15)
    wait_until(lambda: len(worker.events("group_missing")) >= 2, 15)  # healing is retried
    assert worker.proc.poll() is None, worker.text()[-4000:]

    own_server.make_room()
    wait_until(lambda: client.xinfo_groups(keys.stream), 15)  # recreated by the worker
    ids = publish(client, keys, [{"key": "after"}])
    wait_until(lambda: _results_of(client, keys) == ids, 15)
    assert worker.proc.poll() is None
    assert "Traceback" not in worker.text()


def test_an_acl_denying_what_joining_needs_fails_start_up_with_one_line(
    own_server: FullableServer, start_worker: StartWorker
) -> None:
    own_server.client.acl_setuser(
        "no-groups",
        enabled=True,
        passwords=["+secret"],
        keys=["~*"],
        channels=["&*"],
        commands=["+@all", "-xgroup"],
    )
    url = own_server.url.replace("redis://", "redis://no-groups:secret@", 1)
    worker = start_worker(env={"REDIS_URL": url}, processor=NOOP_PROCESSOR)

    assert worker.wait(15) == EXIT_USAGE, worker.text()[-4000:]
    [failed] = worker.events("startup_failed")
    assert "xgroup" in failed["error"].lower()
    assert "Traceback" not in worker.text()
