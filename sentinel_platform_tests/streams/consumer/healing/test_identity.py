"""One process, one consumer: identity holds across containers that share hostname and pid.

Containers with a fixed hostname (host networking, ``hostname:``, ``hostNetwork``) are
all pid 1. The tests reproduce that faithfully: every worker runs as pid 1 of its own PID
namespace (``unshare --pid --fork``) on this host's hostname.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from sentinel_platform.settings import Settings
from sentinel_platform.streams.consumer.group import ensure_group
from sentinel_platform.streams.consumer.healing.lease import Lease
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.processes import (
    FAST_TIMINGS,
    TEST_PROCESSOR,
    StartWorker,
    WorkerProcess,
)
from sentinel_platform_tests.harness.processors import CALLS_KEY
from sentinel_platform_tests.harness.streams import pending_of, publish
from sentinel_platform_tests.harness.waits import wait_until

LEASE_TTL_S = int(FAST_TIMINGS["SENTINEL_LEASE_TTL_MS"]) / 1000
UNSHARE = [shutil.which("unshare") or "unshare", "--pid", "--fork", "--kill-child"]


def _pid_namespaces_available() -> bool:
    try:
        return subprocess.run([*UNSHARE, "true"], capture_output=True, timeout=10).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


needs_pid_namespaces = pytest.mark.skipif(
    not _pid_namespaces_available(), reason="needs `unshare --pid --fork` (root or user namespaces)"
)


@pytest.fixture
def start_as_pid_1(
    worker_env: dict[str, str], tmp_path: Path, tx_keys: StreamKeys
) -> Iterator[object]:
    """Factory: a transactions worker that is pid 1 of a fresh PID namespace."""
    started: list[WorkerProcess] = []

    def start(tag: str, args: Sequence[str] = ()) -> WorkerProcess:
        command = [*UNSHARE, sys.executable, "-m", "workers.watch_transactions"]
        command += ["--processor", TEST_PROCESSOR, *args]
        log_path = tmp_path / f"{tag}.log"
        with log_path.open("ab") as log_file:
            proc = subprocess.Popen(
                command, env=worker_env, stdout=log_file, stderr=subprocess.STDOUT
            )
        worker = WorkerProcess(proc, "", tx_keys, log_path, worker_env)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.kill()  # unshare --kill-child takes the worker with it


def _started_as(worker: WorkerProcess) -> str:
    """The consumer name a worker started with, once it has started."""

    def started() -> str | None:
        if worker.proc.poll() is not None:
            raise AssertionError(f"worker exited with {worker.proc.returncode}:\n{worker.text()}")
        events = worker.events("started")
        return events[0]["consumer"] if events else None

    return wait_until(started, 20)


def _registered_pid(client: RedisClient, keys: StreamKeys, consumer: str) -> int:
    return json.loads(client.hget(keys.consumers, consumer))["pid"]


@needs_pid_namespaces
def test_workers_sharing_hostname_and_pid_get_distinct_consumers(
    redis_client: RedisClient, tx_keys: StreamKeys, start_as_pid_1
) -> None:
    first, second = start_as_pid_1("first"), start_as_pid_1("second")
    names = {_started_as(first), _started_as(second)}

    assert len(names) == 2, f"two processes run as one consumer: {names}"
    # The scenario is the container one: same hostname, both pid 1.
    assert [_registered_pid(redis_client, tx_keys, name) for name in names] == [1, 1]
    keys = [f"m{n}" for n in range(20)]
    publish(redis_client, tx_keys, [{"key": k, "sleep_ms": "20"} for k in keys])
    wait_until(lambda: redis_client.xlen(tx_keys.results) == 20, 20)
    assert redis_client.hgetall(CALLS_KEY) == dict.fromkeys(keys, "1")
    assert first.proc.poll() is None and second.proc.poll() is None


@needs_pid_namespaces
def test_a_second_process_given_a_name_in_use_exits_2_even_with_the_same_hostname_and_pid(
    redis_client: RedisClient, tx_keys: StreamKeys, start_as_pid_1
) -> None:
    first = start_as_pid_1("first", ["--consumer", "slot-1"])
    assert _started_as(first) == "slot-1"
    second = start_as_pid_1("second", ["--consumer", "slot-1"])

    assert second.wait(4 * LEASE_TTL_S + 15) == 2
    [failure] = second.events("startup_failed")
    assert "slot-1" in failure["error"] and "in use" in failure["error"]
    assert "error:" in second.text() and "choose another --consumer" in second.text()
    assert first.proc.poll() is None
    assert redis_client.exists(tx_keys.lease("slot-1"))


def test_a_worker_whose_name_was_taken_while_it_stalled_stops_and_robs_nothing(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    stalled = start_worker(consumer="slot-2").wait_ready(redis_client)
    os.kill(stalled.pid, signal.SIGSTOP)  # a long GC pause, a frozen VM, a debugger
    wait_until(lambda: not stalled.lease_alive(redis_client), 3 * LEASE_TTL_S + 5)
    # A worker holds what it can call at once: three calls, so several messages are its.
    successor = start_worker(consumer="slot-2", args=["--count", "5", "--concurrency", "3"])
    successor.wait_ready(redis_client)
    keys = [f"s{n}" for n in range(5)]
    publish(redis_client, tx_keys, [{"key": k, "sleep_ms": "600"} for k in keys])
    # The successor holds several of them, in its calls.
    wait_until(lambda: pending_of(redis_client, tx_keys, "slot-2") >= 3, 10)
    lease = redis_client.get(tx_keys.lease("slot-2"))

    os.kill(stalled.pid, signal.SIGCONT)

    assert stalled.wait(15) == 2
    assert stalled.events("lease_taken")
    wait_until(lambda: redis_client.xlen(tx_keys.results) == 5, 20)
    # Every message ran once, in the successor; its lease and its membership are intact.
    assert redis_client.hgetall(CALLS_KEY) == dict.fromkeys(keys, "1")
    assert successor.proc.poll() is None
    assert redis_client.get(tx_keys.lease("slot-2")) == lease
    assert "slot-2" in {
        c["name"] for c in redis_client.xinfo_consumers(tx_keys.stream, tx_keys.group)
    }
    assert stalled.events("recovered") == [] and stalled.events("retrying") == []


@pytest.mark.parametrize(
    ("lease_holder", "holds_messages", "outcome", "consumer_kept", "lease_after"),
    [
        ("us", False, "left", False, None),
        ("nobody", False, "left", False, None),
        ("us", True, "holds_messages", True, None),
        ("nobody", True, "holds_messages", True, None),
        ("other", False, "name_taken", True, "other"),
        ("other", True, "name_taken", True, "other"),
    ],
)
def test_leaving_the_group_drops_the_consumer_only_if_it_holds_nothing_and_the_name_is_ours(
    redis_client: RedisClient,
    settings: Settings,
    tx_keys: StreamKeys,
    lease_holder: str,
    holds_messages: bool,
    outcome: str,
    consumer_kept: bool,
    lease_after: str | None,
) -> None:
    ensure_group(redis_client, tx_keys)
    ours = Lease(redis_client, tx_keys, "slot-3", settings.lease_ttl_ms)
    # Joins the group explicitly: a read of an empty stream creates no consumer on Redis 7.0.
    redis_client.xgroup_createconsumer(tx_keys.stream, tx_keys.group, "slot-3")
    if holds_messages:
        publish(redis_client, tx_keys, [{"key": "in-flight"}])
        redis_client.xreadgroup(tx_keys.group, "slot-3", {tx_keys.stream: ">"})
    values = {"us": ours.value, "other": "same-host:1:another-token"}
    if lease_holder in values:
        redis_client.set(ours.key, values[lease_holder], px=60_000)

    assert ours.leave() == outcome

    consumers = {c["name"] for c in redis_client.xinfo_consumers(tx_keys.stream, tx_keys.group)}
    assert ("slot-3" in consumers) == consumer_kept
    assert redis_client.get(ours.key) == values.get(lease_after or "")
    assert pending_of(redis_client, tx_keys, "slot-3") == int(holds_messages)
