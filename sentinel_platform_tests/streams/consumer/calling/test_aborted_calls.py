"""A processor call that raises what is not an ``Exception`` (a plug-in calling
``sys.exit``, a ``KeyboardInterrupt`` out of a library) fails its message, at every
concurrency: logged with its traceback (``processing_aborted``), retried, dead-lettered
at the delivery limit, while both workers keep running with all their threads and every
other message gets its effect once.

It used to end the pool thread silently at a concurrency above 1 (the message stayed in
flight for good on a worker whose lease was alive, and the pool had a thread less), and
at 1 it ended the worker, and then each survivor that recovered the message.
"""

from __future__ import annotations

import pytest

from sentinel_platform.schemas import DeadLetter
from sentinel_platform.streams.consumer.group import ensure_group
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.processes import StartWorker, WorkerProcess
from sentinel_platform_tests.harness.processors import CALLS_KEY, PEAK_KEY
from sentinel_platform_tests.harness.streams import publish
from sentinel_platform_tests.harness.waits import wait_until

DELIVERY_LIMIT = 3
RAISED = {"exit": "SystemExit: 7", "interrupt": "KeyboardInterrupt"}


def _slow(prefix: str, count: int, sleep_ms: int) -> list[dict[str, str]]:
    return [{"key": f"{prefix}{n}", "sleep_ms": str(sleep_ms)} for n in range(count)]


def _effects(client: RedisClient, keys: StreamKeys) -> dict[str, int]:
    counts: dict[str, int] = {}
    for _id, fields in client.xrange(keys.results):
        counts[fields["key"]] = counts.get(fields["key"], 0) + 1
    return counts


def _settled(client: RedisClient, keys: StreamKeys, expected: int) -> bool:
    settled = client.xlen(keys.results) + client.xlen(keys.dlq)
    return settled >= expected and client.xpending(keys.stream, keys.group)["pending"] == 0


def _running(workers: list[WorkerProcess]) -> None:
    for worker in workers:
        assert worker.alive(), f"{worker.name} exited:\n{worker.tail(40)}"


@pytest.mark.parametrize(
    ("abort", "concurrency"), [("exit", 4), ("interrupt", 4), ("exit", 1), ("interrupt", 1)]
)
def test_a_call_raising_a_base_exception_is_dead_lettered_and_no_worker_or_thread_is_lost(
    redis_client: RedisClient,
    tx_keys: StreamKeys,
    start_worker: StartWorker,
    abort: str,
    concurrency: int,
) -> None:
    ensure_group(redis_client, tx_keys)
    good = _slow("good", 12, 200)
    aborting = {"key": "aborting", "abort": abort}
    ids = publish(redis_client, tx_keys, [*good[:6], aborting, *good[6:]])
    env = {"SENTINEL_RECLAIM_DELIVERY_LIMIT": str(DELIVERY_LIMIT)}
    args = ["--concurrency", str(concurrency)]
    workers = [start_worker(args=args, env=env) for _ in range(2)]
    for worker in workers:
        worker.wait_ready(redis_client)

    wait_until(lambda: _settled(redis_client, tx_keys, len(ids)), 45, what="all settled")

    _running(workers)
    [(_id, fields)] = redis_client.xrange(tx_keys.dlq)
    letter = DeadLetter.from_fields(fields)
    assert letter.reason == "max_deliveries_exceeded"
    assert letter.error.startswith(RAISED[abort]), letter.error
    assert redis_client.hget(CALLS_KEY, "aborting") == str(DELIVERY_LIMIT)
    assert _effects(redis_client, tx_keys) == {m["key"]: 1 for m in good}
    aborted = [event for worker in workers for event in worker.events("processing_aborted")]
    assert len(aborted) == DELIVERY_LIMIT  # one line per call, each with its traceback
    assert {event["message_id"] for event in aborted} == {ids[6]}
    assert all(RAISED[abort] in event["error"] for event in aborted)
    assert all("Traceback" in event["exception"] for event in aborted)

    # Every thread of both workers is still there: 2 x C slow calls run at once.
    redis_client.delete(PEAK_KEY)
    after = _slow("after", 2 * concurrency, 6000)  # long enough for every thread to take one
    publish(redis_client, tx_keys, after)
    wait_until(lambda: int(redis_client.get(PEAK_KEY) or 0) == 2 * concurrency, 60, what="peak")
    wait_until(lambda: _settled(redis_client, tx_keys, len(ids) + len(after)), 45)
    _running(workers)
    assert _effects(redis_client, tx_keys) == {m["key"]: 1 for m in [*good, *after]}
