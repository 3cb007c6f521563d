"""Process behaviour: graceful stop, Redis outages, metrics, start-up errors."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

from sentinel_platform.redis_server import RedisServer
from sentinel_platform.settings import load_settings
from sentinel_platform.streams.plumbing.connection import RedisClient, connect
from sentinel_platform.streams.plumbing.keys import StreamKeys, transaction_keys
from sentinel_platform_tests.harness.processes import TEST_PROCESSOR, StartWorker
from sentinel_platform_tests.harness.processors import CALLS_KEY
from sentinel_platform_tests.harness.streams import pending_of, publish
from sentinel_platform_tests.harness.waits import wait_until


def _consumers(client: RedisClient, keys: StreamKeys) -> set[str]:
    return {c["name"] for c in client.xinfo_consumers(keys.stream, keys.group)}


def test_sigterm_finishes_the_message_in_hand_and_exits_zero_holding_nothing(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    keys = [f"m{n}" for n in range(5)]
    publish(redis_client, tx_keys, [{"key": k, "sleep_ms": "400"} for k in keys])
    worker = start_worker(args=["--count", "5"]).wait_ready(redis_client)
    wait_until(lambda: redis_client.hget(CALLS_KEY, "m1"))  # m1 is in hand

    worker.terminate()
    asked = time.monotonic()
    assert worker.wait(10) == 0
    # block (0.2 s) + the rest of the message in hand (< 0.4 s) + process exit, with room
    # for a loaded machine; a drained batch would also show in `done` below
    assert time.monotonic() - asked < 4.0
    done = {fields["key"] for _id, fields in redis_client.xrange(tx_keys.results)}
    assert done == {"m0", "m1"}
    assert pending_of(redis_client, tx_keys, worker.consumer) == 0
    assert worker.consumer not in _consumers(redis_client, tx_keys)
    assert not worker.lease_alive(redis_client)
    assert worker.events("handed_back")[0]["messages"] == 3

    # The handed-back messages are taken over at once by the next worker, exactly once each.
    start_worker().wait_ready(redis_client)
    wait_until(lambda: redis_client.xlen(tx_keys.results) == 5, 10)
    assert redis_client.hgetall(CALLS_KEY) == dict.fromkeys(keys, "1")
    wait_until(lambda: redis_client.xpending(tx_keys.stream, tx_keys.group)["pending"] == 0)


def test_worker_rides_out_a_redis_restart_without_losing_messages(
    redis_binary: str, tmp_path: Path, start_worker: StartWorker
) -> None:
    server = RedisServer(redis_binary, tmp_path / "own-redis").start()
    try:
        settings = load_settings(redis_url=server.url, home=tmp_path / "home")
        keys = transaction_keys(settings)
        client = connect(settings)
        worker = start_worker(env={"REDIS_URL": server.url}).wait_ready(client)
        publish(client, keys, [{"key": f"a{n}"} for n in range(5)])
        wait_until(lambda: client.xlen(keys.results) == 5)
        client.close()

        server.kill()
        wait_until(lambda: worker.events("redis_unavailable"), 10)
        time.sleep(0.5)
        server = RedisServer(redis_binary, tmp_path / "own-redis", port=server.port).start()
        client = connect(settings)
        assert worker.proc.poll() is None
        publish(client, keys, [{"key": f"b{n}"} for n in range(5)])
        wait_until(
            lambda: (
                {f"b{n}" for n in range(5)} <= {f["key"] for _id, f in client.xrange(keys.results)}
            ),
            15,
        )
        worker.terminate()
        assert worker.wait(10) == 0
        client.close()
    finally:
        server.stop()


def test_metrics_are_served_in_prometheus_text_format(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    publish(redis_client, tx_keys, [{"key": f"m{n}"} for n in range(7)] + [{"nokey": "1"}])
    worker = start_worker(
        args=["--metrics-port", "0"], env={"SENTINEL_METRICS_HOST": "0.0.0.0"}
    ).wait_ready(redis_client)
    wait_until(lambda: redis_client.xlen(tx_keys.results) == 7)
    url = wait_until(lambda: worker.events("metrics_serving"))[0]["url"]
    assert url.startswith("http://0.0.0.0:")  # bound for other hosts to scrape

    def scrape() -> str:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.read().decode()

    def settled() -> tuple[str, dict[str, str]] | None:
        # Counters rise after the commit pipeline returns and the PEL gauge is set on the
        # next pass, so the results stream can be ahead of the scrape: wait for one snapshot.
        text = scrape()
        lines = {
            line.split("{")[0].split(" ")[0]: line.rsplit(" ", 1)[1]
            for line in text.splitlines()
            if line and not line.startswith("#")
        }
        done = (
            float(lines.get("sentinel_worker_processed_total", -1)) == 7
            and float(lines.get("sentinel_worker_dead_lettered_total", -1)) == 1
            and float(lines.get("sentinel_worker_pel_depth", -1)) == 0
        )
        return (text, lines) if done else None

    snapshot = wait_until(settled, what="7 processed, 1 dead-lettered, PEL empty")
    assert snapshot is not None  # for the type checker: wait_until returns a truthy value
    text, lines = snapshot
    # Every message decided is timed (8: 7 processed, 1 invalid); commits are timed per pipeline.
    assert float(lines["sentinel_worker_processing_seconds_count"]) == 8
    assert float(lines["sentinel_worker_commit_seconds_count"]) >= 1
    assert float(lines["process_resident_memory_bytes"]) > 0
    assert f'consumer="{worker.consumer}"' in text


def test_bad_settings_and_unknown_processor_fail_at_startup_with_a_clear_message(
    worker_env: dict[str, str],
) -> None:
    def run(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
        command = [sys.executable, "-m", "workers.watch_transactions", *args]
        return subprocess.run(
            command, env={**worker_env, **env}, capture_output=True, text=True, timeout=30
        )

    bad_limit = run({"SENTINEL_RECLAIM_DELIVERY_LIMIT": "0"}, "--processor", TEST_PROCESSOR)
    assert bad_limit.returncode == 2
    assert "SENTINEL_RECLAIM_DELIVERY_LIMIT" in bad_limit.stderr

    missing = run({}, "--processor", "no_such_module:factory")
    assert missing.returncode == 2
    assert "no_such_module" in missing.stderr
    events = [json.loads(line) for line in missing.stderr.splitlines() if line.startswith("{")]
    assert events and events[0]["event"] == "startup_failed"


def test_a_consumer_name_in_use_by_a_live_worker_is_refused(
    redis_client: RedisClient, start_worker: StartWorker
) -> None:
    first = start_worker(consumer="same-name").wait_ready(redis_client)
    second = start_worker(consumer="same-name")
    assert second.wait(10) == 2
    assert "in use" in second.events("startup_failed")[0]["error"]
    assert first.proc.poll() is None
    # A killed worker's name is free again once its lease runs out.
    first.kill()
    third = start_worker(consumer="same-name").wait_ready(redis_client)
    assert third.proc.poll() is None
