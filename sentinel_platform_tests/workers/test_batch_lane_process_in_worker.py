"""The batch lane runs in a process of its own, owned by its worker: real worker
processes (``python -m workers.watch_transactions`` speaking OpenAI's API) against a real
HTTP server speaking OpenAI's Batch API, a real Redis.

What is promised: the lane's bulk work is off the live consumer's interpreter (the
process saying ``batch_lane_started`` is a child of the worker, not the worker, at a
lower CPU priority) while the live stream stays real time; the worker's SIGTERM stops
both within the shutdown deadline, the lane's lease given back; a SIGKILLed worker leaves
no lane process behind.
"""

from __future__ import annotations

from pathlib import Path

from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import batch_stream_key, transaction_keys
from sentinel_platform_tests.harness.batch_api_server import BatchApiServer
from sentinel_platform_tests.harness.processes import Fleet, WorkerProcess
from sentinel_platform_tests.harness.waits import wait_until
from sentinel_platform_tests.workers.test_batch_lane_in_worker import (
    lane_worker,
    once_each,
    publish,
    transactions,
    wait_for_verdicts,
    waited,
)
from workers.batchlane.child import LANE_NICENESS
from workers.batchlane.lane_keys import batch_keys

#: The worker's shutdown deadline in these tests, and what its own stop may add to it.
DEADLINE_S = 3.0
MARGIN_S = 7.0


def stat_of(pid: int) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name; None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except FileNotFoundError:
        return None


def running(pid: int) -> bool:
    """Whether ``pid`` is a process that has not ended (a zombie waiting for its reaper has)."""
    fields = stat_of(pid)
    return fields is not None and fields[0] != "Z"


def lane_pid(worker: WorkerProcess) -> int:
    """The pid of the process that said ``batch_lane_started``."""
    waited(lambda: worker.events("batch_lane_started"), worker, "the lane started")
    (started,) = worker.events("batch_lane_started")
    assert started["mode"] == "batch"
    return int(started["pid"])


def lane_held(client: RedisClient, settings: Settings) -> bool:
    keys = batch_keys(transaction_keys(settings))
    return bool(client.exists(f"{keys.lease_prefix}lane"))


def test_the_lane_runs_in_a_child_of_the_worker_while_live_messages_stay_real_time(
    fleet: Fleet, settings: Settings, redis_client: RedisClient, batch_api_server: BatchApiServer
) -> None:
    keys = transaction_keys(settings)
    worker = lane_worker(fleet, settings, batch_api_server, "lane-1", "openai").wait_ready(
        redis_client
    )
    publish(redis_client, batch_stream_key(keys), transactions("past", 6))
    publish(redis_client, keys.stream, transactions("live", 2))
    found = wait_for_verdicts(redis_client, settings, 8, worker)
    once_each([v for v in found if v.get("lane") == "batch"], [f"past-{n}" for n in range(6)])
    once_each([v for v in found if "lane" not in v], ["live-0", "live-1"])
    pid = lane_pid(worker)
    assert pid != worker.pid
    fields = stat_of(pid)
    assert fields is not None and int(fields[1]) == worker.pid  # its parent is the worker
    own = stat_of(worker.pid)
    assert own is not None
    assert int(fields[16]) == min(19, int(own[16]) + LANE_NICENESS)  # live work goes first
    (process,) = worker.events("batch_lane_process_started")
    assert process["pid"] == pid


def test_sigterm_stops_the_worker_and_its_lane_within_the_deadline(
    fleet: Fleet, settings: Settings, redis_client: RedisClient, batch_api_server: BatchApiServer
) -> None:
    keys = transaction_keys(settings)
    worker = lane_worker(
        fleet, settings, batch_api_server, "lane-1", "openai", shutdown_timeout_s=DEADLINE_S
    ).wait_ready(redis_client)
    publish(redis_client, batch_stream_key(keys), transactions("past", 3))
    wait_for_verdicts(redis_client, settings, 3, worker)
    pid = lane_pid(worker)
    waited(lambda: lane_held(redis_client, settings), worker, "the lane's lease held")
    worker.terminate()
    assert worker.wait(DEADLINE_S + MARGIN_S) == 0, worker.tail(20)
    assert not running(pid)
    (exited,) = worker.events("batch_lane_exited")
    assert (exited["pid"], exited["returncode"], exited["status"]) == (pid, 0, 0)
    assert not worker.events("batch_lane_killed")
    assert not lane_held(redis_client, settings)  # given back at the end of its step


def test_a_sigkilled_worker_leaves_no_lane_process_behind(
    fleet: Fleet, settings: Settings, redis_client: RedisClient, batch_api_server: BatchApiServer
) -> None:
    worker = lane_worker(fleet, settings, batch_api_server, "lane-1", "openai").wait_ready(
        redis_client
    )
    pid = lane_pid(worker)
    waited(lambda: lane_held(redis_client, settings), worker, "the lane's lease held")
    worker.kill()
    wait_until(lambda: not running(pid), timeout_s=10, what="the lane's process gone")
    assert [line["event"] for line in worker.events("batch_lane_parent_gone")] == [
        "batch_lane_parent_gone"
    ]
