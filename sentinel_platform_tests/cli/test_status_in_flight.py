"""``sentinel status`` judges a stream by what its workers published they hold in flight,
and shows it: the pool's allowance per stream, the figure of each worker."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from sentinel_platform.exit_codes import EXIT_BACKPRESSURE
from sentinel_platform.streams.backlog.drain import write_drain_rate
from sentinel_platform.streams.backlog.holdings import publish_holding
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.cli import CliResult, transaction_fields


def _stream(doc: dict, name: str) -> dict:
    return next(s for s in doc["streams"] if s["stream"] == name)


@pytest.fixture
def c8_pool_behind(
    live_worker: Callable[[StreamKeys, str], None],
    redis_client: RedisClient,
    tx_keys: StreamKeys,
    ax_keys: StreamKeys,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The issue's case: C = 8 on a 200 ms processor (40 rows/s), 775 waiting (19 s of
    work, pause at 10 s); the worker holds 8 and published it."""
    monkeypatch.setenv("SENTINEL_WORKER_CONCURRENCY", "8")
    live_worker(tx_keys, "worker-a")
    live_worker(ax_keys, "worker-b")
    for i in range(775):
        redis_client.xadd(tx_keys.stream, transaction_fields(f"tx-{i}"))
    redis_client.xreadgroup(tx_keys.group, "worker-a", {tx_keys.stream: ">"}, count=8)
    write_drain_rate(redis_client, tx_keys, 40.0, 775)
    publish_holding(redis_client, tx_keys, "worker-a", 8, 60)


def test_775_waiting_on_a_c8_worker_are_backpressure_not_nominal(
    cli: Callable[..., CliResult], c8_pool_behind: None, tx_keys: StreamKeys
) -> None:
    result = cli("status", "--json")
    tx = _stream(result.json(), tx_keys.stream)
    assert (tx["zone"], tx["lag"], tx["pending"]) == ("backpressure", 775, 8)
    assert result.code == EXIT_BACKPRESSURE
    assert tx["in_flight_allowance"] == 8
    assert [(c["name"], c["holds"]) for c in tx["consumers"]] == [("worker-a", 8)]
    assert tx["work_s"] > 10


def test_the_text_shows_the_allowance_and_each_workers_figure(
    cli: Callable[..., CliResult], c8_pool_behind: None
) -> None:
    out = cli("status").out
    assert "in flight 8 " in out
    # the worker's limit in force, named so: "holds 100" beside "pending 0" read as a
    # contradiction (it holds what is pending; this is what it may take)
    assert "in-flight limit 8 " in out
    assert "in-flight limit -" in out  # the axioms worker published nothing
    assert "holds" not in out
