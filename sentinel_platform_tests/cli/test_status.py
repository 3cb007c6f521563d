"""``sentinel status``: zones per stream and the exit code a health probe relies on."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from sentinel_platform.exit_codes import (
    EXIT_BACKPRESSURE,
    EXIT_ELEVATED,
    EXIT_ERROR,
    EXIT_OK,
    EXIT_WORKER_OFF,
)
from sentinel_platform.redis_server import free_port
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.progress import MIN_SPAN_S, entries_read, record_publish
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.cli import CliResult, axiom_fields, transaction_fields
from sentinel_platform_tests.harness.streams import publish
from sentinel_platform_tests.harness.waits import wait_until


def _stream(doc: dict, name: str) -> dict:
    return next(s for s in doc["streams"] if s["stream"] == name)


def _publish(client: RedisClient, keys: StreamKeys, n: int) -> None:
    for i in range(n):
        client.xadd(keys.stream, transaction_fields(f"tx-{i}"))


@pytest.fixture
def both_alive(
    live_worker: Callable[[StreamKeys, str], None], tx_keys: StreamKeys, ax_keys: StreamKeys
) -> None:
    live_worker(tx_keys, "worker-a")
    live_worker(ax_keys, "worker-b")


def test_status_is_nominal_and_exits_0_when_workers_alive_and_lag_low(
    cli: Callable[..., CliResult], both_alive: None, redis_client: RedisClient, tx_keys: StreamKeys
) -> None:
    _publish(redis_client, tx_keys, 3)
    result = cli("status", "--json")
    doc = result.json()
    assert result.code == EXIT_OK
    assert doc["zone"] == "nominal"
    tx = _stream(doc, tx_keys.stream)
    assert (tx["zone"], tx["lag"], tx["backlog"], tx["pending"]) == ("nominal", 3, 3, 0)
    assert tx["consumers"][0]["name"] == "worker-a"
    assert tx["consumers"][0]["lease"] == "alive"


def test_status_is_elevated_at_the_warn_limit(
    cli: Callable[..., CliResult],
    both_alive: None,
    redis_client: RedisClient,
    tx_keys: StreamKeys,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SENTINEL_LAG_WARN", "5")
    monkeypatch.setenv("SENTINEL_LAG_PAUSE", "10")
    _publish(redis_client, tx_keys, 5)
    result = cli("status", "--json")
    assert result.code == EXIT_ELEVATED
    assert _stream(result.json(), tx_keys.stream)["zone"] == "elevated"


def test_status_is_backpressure_at_the_pause_limit_counting_pending_and_backlog(
    cli: Callable[..., CliResult],
    both_alive: None,
    redis_client: RedisClient,
    tx_keys: StreamKeys,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SENTINEL_LAG_WARN", "5")
    monkeypatch.setenv("SENTINEL_LAG_PAUSE", "10")
    _publish(redis_client, tx_keys, 10)
    # Deliver 4 without acking: they move from backlog to pending, the lag stays 10.
    redis_client.xreadgroup(tx_keys.group, "worker-a", {tx_keys.stream: ">"}, count=4)
    result = cli("status", "--json")
    tx = _stream(result.json(), tx_keys.stream)
    assert result.code == EXIT_BACKPRESSURE
    assert (tx["zone"], tx["backlog"], tx["pending"], tx["lag"]) == ("backpressure", 6, 4, 10)
    assert tx["consumers"][0]["pending"] == 4


def test_status_is_worker_off_when_no_lease_and_no_lag_key(
    cli: Callable[..., CliResult],
    live_worker: Callable[[StreamKeys, str], None],
    redis_client: RedisClient,
    tx_keys: StreamKeys,
    ax_keys: StreamKeys,
) -> None:
    live_worker(ax_keys, "worker-b")
    redis_client.xgroup_create(tx_keys.stream, tx_keys.group, id="0", mkstream=True)
    redis_client.xadd(tx_keys.stream, transaction_fields("tx-1"))
    redis_client.xreadgroup(tx_keys.group, "dead-worker", {tx_keys.stream: ">"}, count=1)
    result = cli("status", "--json")
    doc = result.json()
    tx = _stream(doc, tx_keys.stream)
    assert result.code == EXIT_WORKER_OFF
    assert (doc["zone"], tx["zone"]) == ("worker_off", "worker_off")
    assert _stream(doc, ax_keys.stream)["zone"] == "nominal"
    dead = tx["consumers"][0]
    assert (dead["name"], dead["lease"], dead["pending"]) == ("dead-worker", "dead", 1)
    assert dead["idle_ms"] is not None


def test_status_shows_dead_letters_per_stream_and_recent_alerts(
    cli: Callable[..., CliResult],
    both_alive: None,
    add_dead_letter: Callable[..., str],
    redis_client: RedisClient,
    settings: Settings,
    tx_keys: StreamKeys,
    ax_keys: StreamKeys,
) -> None:
    add_dead_letter(tx_keys, transaction_fields("bad-1"))
    add_dead_letter(tx_keys, transaction_fields("bad-2"))
    add_dead_letter(ax_keys, axiom_fields("sensor-1"))
    for n in range(3):
        redis_client.xadd(
            settings.alerts_stream,
            {
                "severity": "warning",
                "source": "lag_sensor",
                "stream": tx_keys.stream,
                "summary": f"lag high {n}",
                "condition": "lag",
            },
        )
    doc = cli("status", "--json", "--alerts", "2").json()
    assert _stream(doc, tx_keys.stream)["dlq_depth"] == 2
    assert _stream(doc, ax_keys.stream)["dlq_depth"] == 1
    assert sum(doc["dlq"].values()) == 3
    assert [a["summary"] for a in doc["alerts"]] == ["lag high 2", "lag high 1"]


def test_status_text_has_no_colour_codes_when_not_a_terminal(
    cli: Callable[..., CliResult], both_alive: None, tx_keys: StreamKeys
) -> None:
    result = cli("status")
    assert result.code == EXIT_OK
    assert "\033[" not in result.out
    assert f"{tx_keys.stream}  (group {tx_keys.group})  nominal" in result.out
    assert "overall: nominal (exit 0)" in result.out


def test_status_exits_1_with_one_clear_line_when_redis_is_unreachable(
    cli: Callable[..., CliResult], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REDIS_URL", f"redis://:secret-pw@127.0.0.1:{free_port()}/0")
    result = cli("status")
    assert result.code == EXIT_ERROR
    assert "cannot reach Redis" in result.err
    assert "secret-pw" not in result.err
    assert "Traceback" not in result.err


def test_status_json_from_a_real_subprocess_is_parseable_and_sets_the_exit_code(
    settings_env: dict[str, str], both_alive: None, redis_client: RedisClient, tx_keys: StreamKeys
) -> None:
    _publish(redis_client, tx_keys, 2)
    script = Path(sys.executable).parent / "sentinel"  # the installed console script
    proc = subprocess.run(
        [str(script), "status", "--json"],
        env=settings_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == EXIT_OK, proc.stderr
    doc = json.loads(proc.stdout)
    assert _stream(doc, tx_keys.stream)["backlog"] == 2


def test_status_without_redis_url_never_starts_an_embedded_server(
    cli: Callable[..., CliResult],
    settings: Settings,
    settings_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("REDIS_URL")
    result = cli("status")
    assert result.code == EXIT_ERROR
    assert "sentinel up" in result.err
    assert not (settings.home_dir / "redis" / "server.json").exists()


def test_status_shows_entries_processed_and_the_rate_over_the_last_minute(
    cli: Callable[..., CliResult], start_worker, redis_client: RedisClient, tx_keys: StreamKeys
) -> None:
    """ "Did my run get processed?": the group's entries-read, and how fast it moves."""
    start_worker().wait_ready(redis_client)
    publish(redis_client, tx_keys, [{"key": f"a-{i}"} for i in range(30)])
    # Every `sentinel status` keeps its reading as a rate sample, so the waits read Redis:
    # the only samples are the two readings below, 30 then 50 entries, some seconds apart.
    wait_until(lambda: entries_read(redis_client, tx_keys) == 30)
    first = _stream(cli("status", "--json").json(), tx_keys.stream)
    first_at = time.time()
    assert first["processed"] == 30

    publish(redis_client, tx_keys, [{"key": f"b-{i}"} for i in range(20)])
    wait_until(lambda: entries_read(redis_client, tx_keys) == 50)
    wait_until(lambda: time.time() - first_at >= MIN_SPAN_S + 1, timeout_s=MIN_SPAN_S + 5)
    result = cli("status")
    second = _stream(cli("status", "--json").json(), tx_keys.stream)
    assert second["processed"] == 50
    # 20 entries since the oldest reading of the last minute (taken after the first 30)
    assert 0 < second["rate_per_s"] <= 20 / MIN_SPAN_S
    assert "processed 50" in result.out and "rate (last minute)" in result.out


def test_status_shows_the_last_publish_with_partition_rows_and_outcome(
    cli: Callable[..., CliResult], redis_client: RedisClient, tx_keys: StreamKeys
) -> None:
    record_publish(
        redis_client,
        tx_keys,
        {
            "run_id": "abcdef1234",
            "partition": "2026-11-21",
            "rows": 500,
            "at": 1_795_000_000,
            "outcome": "success",
            "error": None,
        },
    )
    result = cli("status")
    assert "last publish: 2026-11-21 (500 rows) at 2026-11-18 11:06:40 UTC" in result.out
    assert "run abcdef12: success" in result.out
    doc = cli("status", "--json").json()
    tx = _stream(doc, tx_keys.stream)
    assert tx["last_publish"]["partition"] == "2026-11-21" and tx["last_publish"]["rows"] == 500
    assert tx["last_publish"]["at"] == "2026-11-18T11:06:40Z"
