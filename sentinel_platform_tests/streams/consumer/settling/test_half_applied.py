"""A commit or dead letter that fails half-way changes nothing: the retry finishes the job.

Redis does not roll back a Lua script that errors, so every script must make all its
failing writes before anything irreversible (marker, XACK). These tests break the
result stream and the DLQ (a key of the wrong type; a server out of memory under
``noeviction``) while a real worker process commits, check that nothing was acknowledged
or marked in between, repair the server and see the verdict and the dead letter appear.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

from sentinel_platform.redis_server import RedisServer
from sentinel_platform.schemas import DeadLetter
from sentinel_platform.settings import load_settings
from sentinel_platform.streams.plumbing.connection import RedisClient, connect
from sentinel_platform.streams.plumbing.keys import StreamKeys, transaction_keys
from sentinel_platform_tests.harness.processes import NOOP_PROCESSOR, StartWorker
from sentinel_platform_tests.harness.streams import publish
from sentinel_platform_tests.harness.waits import wait_until


def _pending(client: RedisClient, keys: StreamKeys) -> int:
    return int(client.xpending(keys.stream, keys.group)["pending"])


def _assert_nothing_settled(client: RedisClient, keys: StreamKeys, natural_key: str) -> None:
    assert _pending(client, keys) == 2  # neither the valid nor the invalid one was acked
    assert not client.exists(keys.marker(natural_key))
    assert client.llen(keys.recent) == 0


def _assert_no_half_state(client: RedisClient, keys: StreamKeys, ids: list[str]) -> None:
    """Each message is either untouched (pending, no trace) or fully settled."""
    pending = {
        p["message_id"] for p in client.xpending_range(keys.stream, keys.group, "-", "+", 10)
    }
    marked, verdicts = client.exists(keys.marker("good")), client.xlen(keys.results)
    assert (ids[0] in pending, marked, verdicts) in {(True, 0, 0), (False, 1, 1)}
    assert (ids[1] in pending, client.xlen(keys.dlq)) in {(True, 0), (False, 1)}


def _assert_all_settled(
    client: RedisClient, keys: StreamKeys, ids: list[str], recent: list[str]
) -> None:
    wait_until(lambda: client.xlen(keys.results) == 1 and client.xlen(keys.dlq) == 1, 20)
    [(_rid, result)] = client.xrange(keys.results)
    assert result["source_message_id"] == ids[0]
    [(_did, fields)] = client.xrange(keys.dlq)
    letter = DeadLetter.from_fields(fields)
    assert (letter.message_id, letter.reason) == (ids[1], "invalid_message")
    assert letter.original_fields == {"nokey": "1"}
    assert client.lrange(keys.recent, 0, -1) == recent
    wait_until(lambda: _pending(client, keys) == 0)


def test_results_and_dlq_of_the_wrong_type_leave_everything_pending_until_repaired(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    redis_client.set(tx_keys.results, "not a stream")
    redis_client.set(tx_keys.dlq, "not a stream")
    ids = publish(redis_client, tx_keys, [{"key": "good"}, {"nokey": "1"}])
    worker = start_worker().wait_ready(redis_client)

    wait_until(lambda: worker.events("redis_error"), 15)
    assert worker.proc.poll() is None
    _assert_nothing_settled(redis_client, tx_keys, "good")

    redis_client.delete(tx_keys.results, tx_keys.dlq)
    _assert_all_settled(redis_client, tx_keys, ids, recent=["good"])
    assert worker.events("duplicate_ack") == []
    assert worker.proc.poll() is None


def test_a_server_out_of_memory_leaves_everything_pending_until_it_has_room(
    redis_binary: str, tmp_path: Path, start_worker: StartWorker
) -> None:
    server = RedisServer(
        redis_binary, tmp_path / "oom-redis", config={"maxmemory-policy": "noeviction"}
    ).start()
    try:
        settings = load_settings(redis_url=server.url, home=tmp_path / "home")
        keys = transaction_keys(settings)
        client = connect(settings)
        # The no-op processor writes nothing itself: only the commit meets the full server.
        worker = start_worker(env={"REDIS_URL": server.url}, processor=NOOP_PROCESSOR)
        worker.wait_ready(client)
        # Publish while the worker is frozen, then leave no room: only its writes fail.
        os.kill(worker.pid, signal.SIGSTOP)
        ids = publish_together(client, keys, [{"key": "good"}, {"nokey": "1"}])
        client.config_set("maxmemory", 1)
        os.kill(worker.pid, signal.SIGCONT)

        wait_until(lambda: any("maxmemory" in e["error"] for e in worker.events("redis_error")), 15)
        _assert_no_half_state(client, keys, ids)

        client.config_set("maxmemory", 0)
        _assert_all_settled(client, keys, ids, recent=[])
        assert worker.events("duplicate_ack") == []
        assert worker.proc.poll() is None
        client.close()
    finally:
        server.stop()


def publish_together(
    client: RedisClient, keys: StreamKeys, messages: list[dict[str, str]]
) -> list[str]:
    """Publish in one MULTI, so a blocked reader gets every message in one read (a plain
    pipeline wakes it after the first XADD)."""
    pipe = client.pipeline(transaction=True)
    for fields in messages:
        pipe.xadd(keys.stream, fields)
    return list(pipe.execute())
