"""``sentinel exporter`` as a real process against the real test Redis: what it serves per
stream with no worker running, that a live worker shows up, the analyzer's holds, that a
frozen server costs a scrape no more than the exporter's timeout, and that a taken port is
refused."""

from __future__ import annotations

import signal
import socket
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from sentinel_platform.redis_server import free_port
from sentinel_platform.streams.operators import analyzer_holds as holds
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.batch_lane import fill_batch_lane, record_batch
from sentinel_platform_tests.harness.cli import SENTINEL, transaction_fields
from sentinel_platform_tests.harness.waits import wait_until

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(port: int, timeout_s: float = 30) -> Samples:
    """``/metrics`` of the exporter on ``port``, as {(name, labels): value}."""
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout_s) as r:
        text = r.read().decode()
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
    }


def value(samples: Samples, metric: str, **labels: str) -> float | None:
    return samples.get((metric, frozenset(labels.items())))


def answers(port: int) -> bool:
    try:
        scrape(port, timeout_s=2)
    except OSError:
        return False
    return True


@pytest.fixture
def start_exporter(tmp_path: Path) -> Iterator[Callable[..., tuple[int, subprocess.Popen[bytes]]]]:
    """``start_exporter(env, *argv)``: a real ``sentinel exporter`` on a free port, once it
    answers; SIGTERMed (then killed) after the test."""
    started: list[subprocess.Popen[bytes]] = []

    def start(env: Mapping[str, str], *argv: str) -> tuple[int, subprocess.Popen[bytes]]:
        port = free_port()
        log = (tmp_path / f"exporter-{port}.log").open("wb")
        process = subprocess.Popen(
            [str(SENTINEL), "exporter", "--port", str(port), *argv],
            env=dict(env),
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        started.append(process)
        wait_until(lambda: answers(port) or process.poll() is not None, timeout_s=60)
        assert process.poll() is None, (tmp_path / f"exporter-{port}.log").read_text()
        return port, process

    yield start
    for process in started:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)


def _labels(keys: StreamKeys) -> dict[str, str]:
    return {"stream": keys.stream, "group": keys.group}


def test_exporter_serves_a_stream_with_no_worker_then_sees_a_live_one(
    settings_env: dict[str, str],
    redis_client: RedisClient,
    tx_keys: StreamKeys,
    add_dead_letter: Callable[..., str],
    start_exporter: Callable[..., tuple[int, subprocess.Popen[bytes]]],
) -> None:
    # Five messages added two minutes ago (their ids carry the time), two read and not
    # acknowledged by a consumer that holds no lease: backlog 3, pending 2, no worker.
    added_ms = int(time.time() * 1000) - 120_000
    redis_client.xgroup_create(tx_keys.stream, tx_keys.group, id="0", mkstream=True)
    for n in range(5):
        fields: dict[Any, Any] = dict(transaction_fields(f"t{n}"))
        redis_client.xadd(tx_keys.stream, fields, id=f"{added_ms}-{n}")
    redis_client.xreadgroup(tx_keys.group, "gone-worker", {tx_keys.stream: ">"}, count=2)
    add_dead_letter(tx_keys, transaction_fields("bad"))
    add_dead_letter(tx_keys, transaction_fields("worse"))

    port, _process = start_exporter(settings_env)
    samples = scrape(port)
    labels = _labels(tx_keys)
    assert value(samples, "sentinel_exporter_redis_up") == 1
    assert value(samples, "sentinel_stream_backlog_messages", **labels) == 3
    assert value(samples, "sentinel_stream_pending_messages", **labels) == 2
    assert value(samples, "sentinel_stream_lag_messages", **labels) == 5
    assert value(samples, "sentinel_stream_live_workers", **labels) == 0
    oldest = value(samples, "sentinel_stream_oldest_pending_age_seconds", **labels)
    assert oldest is not None and 119 <= oldest < 600
    assert value(samples, "sentinel_stream_zone", **labels, zone="worker_off") == 1
    assert value(samples, "sentinel_stream_zone", **labels, zone="nominal") == 0
    assert value(samples, "sentinel_stream_lease_ttl_seconds", **labels) == 5
    assert value(samples, "sentinel_stream_pause_limit_seconds", **labels) == 10
    assert value(samples, "sentinel_dlq_entries", dlq=tx_keys.dlq) == 2
    assert value(samples, "sentinel_dlq_added_total", dlq=tx_keys.dlq) == 2
    assert value(samples, "sentinel_redis_eviction_verdict", verdict="ok") == 1
    info = {"name": "transactions", "dlq": tx_keys.dlq, **labels}
    assert value(samples, "sentinel_stream_info", **info) == 1
    # No series is keyed by a consumer name (new on every restart).
    assert not [key for key in samples if "consumer" in dict(key[1])]

    # A worker takes its lease: the next scrape counts it and leaves worker off.
    redis_client.set(tx_keys.lease("worker-a"), "1", px=60_000)  # what a live worker keeps
    redis_client.hset(tx_keys.consumers, "worker-a", "{}")
    redis_client.set(tx_keys.lag, 5, ex=60)
    samples = scrape(port)
    assert value(samples, "sentinel_stream_live_workers", **labels) == 1
    assert value(samples, "sentinel_stream_zone", **labels, zone="worker_off") == 0
    # Acknowledging the pending pair leaves nothing pending: the age reads 0.
    pending = redis_client.xpending_range(tx_keys.stream, tx_keys.group, "-", "+", 10)
    redis_client.xack(tx_keys.stream, tx_keys.group, *[row["message_id"] for row in pending])
    samples = scrape(port)
    assert value(samples, "sentinel_stream_oldest_pending_age_seconds", **labels) == 0
    assert value(samples, "sentinel_stream_pending_messages", **labels) == 0


def test_a_frozen_server_costs_a_scrape_the_timeout_not_more(
    settings_env: dict[str, str],
    start_exporter: Callable[..., tuple[int, subprocess.Popen[bytes]]],
) -> None:
    # A server that accepts connections and never answers (a frozen Redis).
    with socket.socket() as frozen:
        frozen.bind(("127.0.0.1", 0))
        frozen.listen(16)
        env = {**settings_env, "REDIS_URL": f"redis://127.0.0.1:{frozen.getsockname()[1]}/0"}
        port, process = start_exporter(env, "--timeout", "1")
        for attempt in (1, 2):
            started = time.monotonic()
            samples = scrape(port)
            took = time.monotonic() - started
            assert took < 4, f"scrape {attempt} took {took:.1f}s with a 1 s timeout"
            assert value(samples, "sentinel_exporter_redis_up") == 0
            assert not [key for key in samples if key[0].startswith("sentinel_stream_")]
        assert (value(samples, "sentinel_exporter_read_errors_total", reason="timeout") or 0) >= 2
        # SIGTERM ends it promptly even with a read stuck on the frozen server.
        process.send_signal(signal.SIGTERM)
        assert process.wait(15) == 0


def test_a_port_in_use_is_refused_with_exit_2(settings_env: dict[str, str]) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [str(SENTINEL), "exporter", "--port", str(port)],
            env=settings_env,
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert result.returncode == 2, result.stderr
    assert f"--port {port}" in result.stderr and "cannot serve metrics" in result.stderr


def test_exporter_serves_each_analyzer_hold_with_its_seconds_left_until_released(
    settings_env: dict[str, str],
    redis_client: RedisClient,
    start_exporter: Callable[..., tuple[int, subprocess.Popen[bytes]]],
) -> None:
    holds.register(redis_client, "gpt-eu", "https://bot:Pw-1234567@api.example.com/v1")
    holds.register(redis_client, "quota-svc", "https://q.example.com/v1")
    record = holds.encode_hold("gpt-eu", "", "retry_after", "HTTP 429", 3600)
    redis_client.set(holds.hold_key("gpt-eu"), record, px=3_600_000)
    endless = holds.encode_hold("quota-svc", "", "exhausted", "quota used up", None)
    redis_client.set(holds.hold_key("quota-svc"), endless)
    port, _process = start_exporter(settings_env)
    samples = scrape(port)
    shown = {"analyzer_id": "gpt-eu", "analyzer": "https://bot:***@api.example.com/v1"}
    left = value(samples, "sentinel_analyzer_hold_seconds", **shown, cause="retry_after")
    assert left is not None and 3500 < left <= 3600
    endless_labels = {"analyzer_id": "quota-svc", "analyzer": "https://q.example.com/v1"}
    until = value(samples, "sentinel_analyzer_hold_seconds", **endless_labels, cause="exhausted")
    assert until == float("inf")
    assert not [key for key in samples if "Pw-1234567" in str(key)]
    holds.release(redis_client, ["gpt-eu", "quota-svc"])
    samples = scrape(port)
    assert not [key for key in samples if key[0] == "sentinel_analyzer_hold_seconds"]


def test_exporter_serves_the_provisional_verdicts_waiting_and_the_oldest_ones_age(
    settings_env: dict[str, str],
    redis_client: RedisClient,
    tx_keys: StreamKeys,
    start_exporter: Callable[..., tuple[int, subprocess.Popen[bytes]]],
) -> None:
    # Three provisional verdicts queued two minutes ago (their ids carry the time).
    queued_ms = int(time.time() * 1000) - 120_000
    for n in range(3):
        entry: dict[Any, Any] = {**transaction_fields(f"p{n}"), "sentinel_rescreen_of": f"1-{n}"}
        redis_client.xadd(tx_keys.rescreen, entry, id=f"{queued_ms}-{n}")
    port, _process = start_exporter(settings_env)
    samples = scrape(port)
    labels = _labels(tx_keys)
    assert value(samples, "sentinel_provisional_verdicts", **labels) == 3
    oldest = value(samples, "sentinel_provisional_oldest_age_seconds", **labels)
    assert oldest is not None and 119 <= oldest < 600


def test_exporter_serves_the_batch_lane_apart_from_the_lag(
    settings_env: dict[str, str],
    redis_client: RedisClient,
    tx_keys: StreamKeys,
    start_exporter: Callable[..., tuple[int, subprocess.Popen[bytes]]],
) -> None:
    # Five messages in the batch lane, two of them in a batch submitted 3 hours ago.
    fill_batch_lane(redis_client, tx_keys, 5, 2)
    record_batch(redis_client, tx_keys, "b-1", 3, "in_progress")
    port, _process = start_exporter(settings_env)
    samples = scrape(port)
    labels = _labels(tx_keys)
    assert value(samples, "sentinel_batch_messages", **labels, state="waiting") == 3
    assert value(samples, "sentinel_batch_messages", **labels, state="at_provider") == 2
    assert value(samples, "sentinel_batch_batches", **labels) == 1
    oldest = value(samples, "sentinel_batch_oldest_age_seconds", **labels)
    assert oldest is not None and 10_800 <= oldest < 10_800 + 300
    assert value(samples, "sentinel_stream_lag_messages", **labels) == 0
