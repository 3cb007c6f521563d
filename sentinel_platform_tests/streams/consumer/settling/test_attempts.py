"""Attempt records: counted once per delivery, never immortal (cleared on every exit path:
see ``streams/consumer/test_consumer_dead_letters.py`` and ``test_consumer_recovery.py``).

The records are looked up without assuming their layout (one hash per message, or
fields of a shared hash): whatever key or field names a message id is its record.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
import redis

from sentinel_platform.redis_server import RedisServer
from sentinel_platform.settings import load_settings
from sentinel_platform.streams.consumer.group import ensure_group
from sentinel_platform.streams.consumer.settling.attempts import read_attempts, record_call
from sentinel_platform.streams.plumbing.connection import RedisClient, connect
from sentinel_platform.streams.plumbing.keys import StreamKeys, transaction_keys
from sentinel_platform_tests.harness.consumers import records_of
from sentinel_platform_tests.harness.processes import StartWorker
from sentinel_platform_tests.harness.streams import publish
from sentinel_platform_tests.harness.waits import wait_until

# --- client retries (a reply lost while Redis stalls) ---------------------------------------


@pytest.fixture
def debug_server(redis_binary: str, tmp_path: Path) -> RedisServer:
    server = RedisServer(
        redis_binary, tmp_path / "stalling-redis", config={"enable-debug-command": "yes"}
    ).start()
    yield server
    server.stop()


def _stall(server: RedisServer, seconds: float) -> threading.Thread:
    """Block the whole server for ``seconds`` (DEBUG SLEEP) and return once it is asleep."""
    sleeper = redis.Redis(port=server.port, socket_timeout=seconds + 10)
    thread = threading.Thread(target=sleeper.execute_command, args=("DEBUG", "SLEEP", seconds))
    thread.start()
    probe = redis.Redis(port=server.port, socket_timeout=0.3, retry_on_timeout=False)

    def asleep() -> bool:
        try:
            probe.ping()
        except redis.TimeoutError:
            return True
        return False

    wait_until(asleep, 5)
    return thread


@pytest.mark.slow  # the server stalls past the client's socket timeout: over 10 s
def test_a_call_record_resent_after_a_lost_reply_is_counted_once(
    debug_server: RedisServer, tmp_path: Path
) -> None:
    settings = load_settings(redis_url=debug_server.url, home=tmp_path, block_ms=0)
    client = connect(settings)  # the workers' client: it re-sends on a socket timeout
    keys = transaction_keys(settings)
    ensure_group(client, keys)
    [message_id] = publish(client, keys, [{"key": "k"}])
    stall_s = client.connection_pool.connection_kwargs["socket_timeout"] + 1.5

    sleeper = _stall(debug_server, stall_s)
    record_call(client, keys, message_id, 2, 600)  # sent into the stall, re-sent after it
    sleeper.join()

    assert read_attempts(client, keys, [message_id])[message_id].calls == 1
    record_call(client, keys, message_id, 2, 600)  # the same delivery again: no new call
    assert read_attempts(client, keys, [message_id])[message_id].calls == 1
    record_call(client, keys, message_id, 3, 600)  # the next delivery is a new call
    assert read_attempts(client, keys, [message_id])[message_id].calls == 2
    client.close()


# --- records that would leak ----------------------------------------------------------------


def test_a_leaked_record_expires_on_its_own_however_busy_the_stream(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    [leaked] = publish(redis_client, tx_keys, [{"key": "leaked", "poison": "1"}])
    worker = start_worker(
        env={"SENTINEL_RETRY_BACKOFF_MS": "60000", "SENTINEL_IDEMPOTENCY_TTL_S": "60"}
    )
    wait_until(lambda: records_of(redis_client, tx_keys, leaked), 10)
    # Settled behind the worker's back (an operator's XACK): nothing will clear its record.
    redis_client.xack(tx_keys.stream, tx_keys.group, leaked)
    [holder] = records_of(redis_client, tx_keys, leaked)
    ttl_before, since = redis_client.pttl(holder), time.monotonic()
    assert 0 < ttl_before <= 60_000

    # A busy stream: other messages fail and record their errors all the time.
    for round_ in range(4):
        publish(
            redis_client, tx_keys, [{"key": f"busy{round_}-{n}", "poison": "1"} for n in range(5)]
        )
        failures = 6 + 5 * round_
        wait_until(lambda n=failures: len(worker.events("processing_failed")) >= n, 10)
        time.sleep(0.5)

    elapsed_ms = (time.monotonic() - since) * 1000
    assert elapsed_ms > 2000
    # Its TTL ran down with the clock: no other message's write refreshed it.
    assert redis_client.pttl(holder) <= ttl_before - elapsed_ms + 500
