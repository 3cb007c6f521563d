"""Start-up stays stoppable and refuses bad settings before it touches Redis.

A worker restarted under a fixed consumer name (``sentinel up`` gives each slot one) meets
its killed predecessor's lease; when the predecessor's registered connection cannot tell
it is dead (no registration: a vanished host, a predecessor without the link) it waits for
the lease to run out (a closed connection is taken over at once: ``test_lease_takeover.py``,
a live holder is never taken over). SIGTERM during that wait, or
during the wait for Redis (unreachable, or frozen: it accepts connections and never
answers), ends the process at once with exit status 0 and a ``stopped`` line, having taken
nothing. A ``--metrics-port`` that cannot be served is a bad setting: exit status 2, one
line naming it, before any Redis work.

Every worker here is the real ``python -m workers.watch_transactions`` process.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import psutil
import pytest

from sentinel_platform.redis_server import RedisServer, free_port
from sentinel_platform.streams.consumer.healing.liveness import registration_key
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.processes import (
    REPO_ROOT,
    TEST_PROCESSOR,
    Fleet,
    WorkerProcess,
)
from sentinel_platform_tests.harness.waits import wait_until

#: A lease that outlives the test by far: before the fix the wait lasted two of them.
LONG_LEASE = {"SENTINEL_LEASE_TTL_MS": "60000"}
#: SIGTERM to exit, with room for a loaded 2-core machine; the old wait lasted 120 s.
STOP_DEADLINE_S = 5.0
ENTRY = [sys.executable, "-m", "workers.watch_transactions"]
TEST_ARGS = ["--processor", TEST_PROCESSOR]


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    with Fleet(tmp_path) as owned:
        yield owned


def launch(fleet: Fleet, env: Mapping[str, str], consumer: str, tag: str) -> WorkerProcess:
    """``python -m workers.watch_transactions --consumer <consumer>``, owned by ``fleet``."""
    log_path = fleet.log_dir / f"{tag}.log"
    command = [*ENTRY, "--consumer", consumer, *TEST_ARGS]
    with log_path.open("ab") as log:
        proc = subprocess.Popen(
            command,
            env=dict(env),
            cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    return fleet.adopt(WorkerProcess(proc, consumer, None, log_path, env))


def logged(worker: WorkerProcess, event: str, timeout_s: float = 30.0) -> dict[str, Any]:
    """The first ``event`` line of a worker that must still be running when it logs it."""

    def first() -> dict[str, Any] | None:
        found = worker.events(event)
        if found:
            return found[0]
        if not worker.alive():
            raise AssertionError(
                f"exited {worker.proc.returncode} before {event}:\n{worker.tail()}"
            )
        return None

    found = wait_until(first, timeout_s, what=f"{worker.name} logs {event}")
    assert found is not None  # for the type checker: wait_until returns a truthy value
    return found


def sigterm_exit(worker: WorkerProcess) -> tuple[int, float]:
    """SIGTERM; (exit status, seconds it took). Fails if it outlives the deadline."""
    asked = time.monotonic()
    worker.terminate()
    try:
        status = worker.wait(STOP_DEADLINE_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running {STOP_DEADLINE_S}s after SIGTERM:\n{worker.tail()}")
    return status, time.monotonic() - asked


def assert_stopped_cleanly(worker: WorkerProcess, status: int, waiting_for: str) -> None:
    assert status == 0, worker.tail()
    assert [e["waiting_for"] for e in worker.events("stopped")] == [waiting_for]
    assert not worker.events("startup_failed") and not worker.events("uncaught_exception")
    assert not worker.events("started")  # it never joined


def test_sigterm_while_a_restarted_worker_waits_for_its_killed_predecessors_lease_exits_0(
    redis_client: RedisClient, tx_keys: StreamKeys, worker_env: dict[str, str], fleet: Fleet
) -> None:
    env = {**worker_env, **LONG_LEASE}
    predecessor = launch(fleet, env, "slot-1", "predecessor").wait_ready(redis_client)
    predecessor.kill()  # SIGKILL: its lease lives on for up to a minute
    # Its registered connection tells nothing now (as for a vanished host): the lease decides.
    redis_client.delete(registration_key(tx_keys, "slot-1"))
    lease_key = tx_keys.lease("slot-1")
    lease = redis_client.get(lease_key)
    assert lease is not None and redis_client.pttl(lease_key) > 30_000

    restarted = launch(fleet, env, "slot-1", "restarted")
    waiting = logged(restarted, "lease_waiting")
    assert waiting["holder"] == lease and waiting["wait_s"] == 120  # two TTLs: the bound

    status, took = sigterm_exit(restarted)

    assert_stopped_cleanly(restarted, status, "lease")
    assert took < STOP_DEADLINE_S
    # Nothing was taken: the predecessor's lease is as it was, for the survivors to judge.
    assert redis_client.get(lease_key) == lease


def test_sigterm_while_waiting_for_a_name_a_live_worker_holds_leaves_that_worker_alone(
    redis_client: RedisClient, tx_keys: StreamKeys, worker_env: dict[str, str], fleet: Fleet
) -> None:
    env = {**worker_env, **LONG_LEASE}
    holder = launch(fleet, env, "slot-2", "holder").wait_ready(redis_client)
    lease = redis_client.get(tx_keys.lease("slot-2"))
    registration = redis_client.hget(tx_keys.consumers, "slot-2")

    second = launch(fleet, env, "slot-2", "second")
    logged(second, "lease_waiting")
    status, _took = sigterm_exit(second)

    assert_stopped_cleanly(second, status, "lease")
    assert holder.alive()
    assert not second.events("lease_taken_over")  # its connection is open: never taken over
    assert redis_client.get(tx_keys.lease("slot-2")) == lease
    assert redis_client.hget(tx_keys.consumers, "slot-2") == registration


def test_sigterm_while_redis_is_unreachable_at_startup_exits_0_with_a_stopped_line(
    worker_env: dict[str, str], fleet: Fleet
) -> None:
    env = {**worker_env, "REDIS_URL": f"redis://127.0.0.1:{free_port()}/0"}  # nobody listens
    worker = launch(fleet, env, "slot-3", "unreachable")
    logged(worker, "redis_unavailable")

    status, _took = sigterm_exit(worker)

    assert_stopped_cleanly(worker, status, "redis")


def _connected(worker: WorkerProcess, port: int) -> bool:
    """Whether the worker has a TCP connection established to 127.0.0.1:``port``."""
    if not worker.alive():
        raise AssertionError(f"exited {worker.proc.returncode}:\n{worker.tail()}")
    return any(
        c.raddr and c.raddr.port == port and c.status == psutil.CONN_ESTABLISHED
        for c in psutil.Process(worker.pid).net_connections(kind="tcp")
    )


def test_sigterm_while_connecting_to_a_frozen_server_at_startup_exits_0_at_once(
    redis_binary: str, tmp_path: Path, worker_env: dict[str, str], fleet: Fleet
) -> None:
    server = RedisServer(redis_binary, tmp_path / "frozen-redis").start()
    assert server.process is not None
    os.kill(server.process.pid, signal.SIGSTOP)  # the kernel still accepts; nothing answers
    try:
        worker = launch(fleet, {**worker_env, "REDIS_URL": server.url}, "slot-4", "frozen")
        wait_until(lambda: _connected(worker, server.port), 30, what="worker connected")

        status, took = sigterm_exit(worker)  # its first attempt waits on a socket timeout

        assert_stopped_cleanly(worker, status, "redis")
        assert took < STOP_DEADLINE_S
    finally:
        os.kill(server.process.pid, signal.SIGCONT)
        server.stop()


def _connections(client: RedisClient) -> int:
    return int(client.info("stats")["total_connections_received"])


@pytest.mark.parametrize(
    ("host", "why"),
    [("127.0.0.1", "in use"), ("192.0.2.1", "not an address of this host")],
)
def test_a_metrics_port_that_cannot_be_served_fails_startup_before_any_redis_work(
    redis_client: RedisClient,
    tx_keys: StreamKeys,
    worker_env: dict[str, str],
    host: str,
    why: str,
) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]  # held by a real listening socket
        before = _connections(redis_client)
        result = subprocess.run(
            [*ENTRY, "--consumer", "metrics-clash", "--metrics-port", str(port), *TEST_ARGS],
            env={**worker_env, "SENTINEL_METRICS_HOST": host},
            cwd=REPO_ROOT,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=60,
        )

    assert result.returncode == 2, result.stderr
    [error] = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert "--metrics-port" in error and "SENTINEL_METRICS_HOST" in error, error
    assert f"{host}:{port}" in error, error
    assert "Traceback" not in result.stderr and "uncaught_exception" not in result.stderr
    # Refused before any Redis work: it never connected, took no lease, made no group.
    assert _connections(redis_client) == before, why
    assert not redis_client.exists(tx_keys.lease("metrics-clash"))
    assert not redis_client.exists(tx_keys.stream)
