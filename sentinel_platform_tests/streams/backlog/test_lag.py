"""Lag is exact at any backlog size, including when the server cannot report it itself."""

from __future__ import annotations

from typing import Any

import pytest

from sentinel_platform.streams.backlog.lag import (
    COUNT_PAGE,
    GroupState,
    backlog_from_state,
    count_side,
    measure_lag,
    read_lag_key,
    whole_stream_lag,
)
from sentinel_platform.streams.backlog.lag_baseline import RECOUNT_INTERVAL_S
from sentinel_platform.streams.consumer.group import ensure_group
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.processes import StartWorker
from sentinel_platform_tests.harness.streams import publish
from sentinel_platform_tests.harness.waits import wait_until

BIG = 15_000


def _fill(client: RedisClient, keys: StreamKeys, count: int) -> list[str]:
    ids: list[str] = []
    for start in range(0, count, 5000):
        stop = min(start + 5000, count)
        ids += publish(client, keys, [{"key": f"m{n}"} for n in range(start, stop)])
    return ids


def _server_lag(client: RedisClient, keys: StreamKeys) -> int | None:
    group = next(g for g in client.xinfo_groups(keys.stream) if g["name"] == keys.group)
    return group["lag"]


@pytest.mark.parametrize("delete_at", [200, BIG - 200], ids=["near_the_group", "near_the_tail"])
def test_lag_above_ten_thousand_is_exact_when_the_server_reports_none(
    redis_client: RedisClient, tx_keys: StreamKeys, delete_at: int
) -> None:
    client, keys = redis_client, tx_keys
    ensure_group(client, keys)
    ids = _fill(client, keys, BIG)
    client.xreadgroup(keys.group, "reader", {keys.stream: ">"}, count=100)
    client.xdel(keys.stream, ids[delete_at])
    assert _server_lag(client, keys) is None  # the case the server cannot answer

    reading = measure_lag(client, keys)

    assert reading.pending == 100
    assert reading.backlog == BIG - 100 - 1


def test_lag_never_counts_entries_trimmed_before_delivery(
    redis_client: RedisClient, tx_keys: StreamKeys
) -> None:
    client, keys = redis_client, tx_keys
    ensure_group(client, keys)
    ids = publish(client, keys, [{"key": f"m{n}"} for n in range(50)])
    client.xtrim(keys.stream, minid=ids[30], approximate=False)

    reading = measure_lag(client, keys)

    assert reading.backlog == 20 == client.xlen(keys.stream)


def test_worker_publishes_the_exact_lag_of_a_large_backlog(
    redis_client: RedisClient, tx_keys: StreamKeys, start_worker: StartWorker
) -> None:
    client, keys = redis_client, tx_keys
    ensure_group(client, keys)
    publish(client, keys, [{"key": "slow", "sleep_ms": "60000"}])
    ids = _fill(client, keys, 12_000)
    worker = start_worker(args=["--count", "1"]).wait_ready(client)
    wait_until(lambda: client.hget("test:processor_calls", "slow") == "1", 20)
    client.xdel(keys.stream, ids[5000])
    assert _server_lag(client, keys) is None

    expected = 1 + 12_000 - 1  # the slow message pending, the rest waiting, one deleted
    wait_until(lambda: read_lag_key(client, keys) == expected, 20)
    worker.kill()


@pytest.mark.parametrize(
    ("state", "backlog"),
    [
        (GroupState(length=10, pending=0, lag=4, last_delivered_id="1-0", entries_read=6), 4),
        (GroupState(length=3, pending=0, lag=9, last_delivered_id="1-0", entries_read=1), 3),
        (GroupState(length=3, pending=0, lag=0, last_delivered_id="1-0", entries_read=3), 0),
        (GroupState(length=3, pending=0, lag=None, last_delivered_id="1-0", entries_read=1), None),
    ],
)
def test_backlog_comes_from_the_servers_bookkeeping_when_it_has_one(
    state: GroupState, backlog: int | None
) -> None:
    assert backlog_from_state(state) == backlog


@pytest.mark.parametrize(
    ("entries_read", "entries_added", "length", "side"),
    [
        (None, 100, 100, "after"),
        (10, None, 100, "after"),
        (90, 100, 100, "after"),
        (10, 100, 100, "before"),
        (50, 100, 100, "after"),
    ],
)
def test_the_cheaper_side_of_the_group_is_counted(
    entries_read: int | None, entries_added: int | None, length: int, side: str
) -> None:
    state = GroupState(length, 0, None, "1-0", entries_read, entries_added)
    assert count_side(state) == side


def _xrange_calls(client: RedisClient) -> int:
    """XRANGE calls the server ran since the last CONFIG RESETSTAT (scripts' included)."""
    stats: dict[str, Any] = client.info("commandstats")
    return int(stats.get("cmdstat_xrange", {}).get("calls", 0))


def test_lag_measured_again_and_again_after_an_xdel_counts_the_backlog_once(
    redis_client: RedisClient, tx_keys: StreamKeys
) -> None:
    # The group in the middle of the stream, an entry deleted ahead of it: the server has
    # no lag to report, and either side of the group holds half the stream.
    client, keys = redis_client, tx_keys
    ensure_group(client, keys)
    ids = _fill(client, keys, 2 * BIG)
    client.xreadgroup(keys.group, "reader", {keys.stream: ">"}, count=BIG)
    client.xdel(keys.stream, ids[BIG + BIG // 2])
    backlog, pending, rounds, removed = BIG - 1, BIG, 20, 0
    client.config_resetstat()

    for round_ in range(rounds):
        assert _server_lag(client, keys) is None
        reading = measure_lag(client, keys)
        assert reading.pending == pending
        assert backlog <= reading.backlog <= backlog + removed, round_
        client.xreadgroup(keys.group, "reader", {keys.stream: ">"}, count=50)
        publish(client, keys, [{"key": f"new{round_}.{n}"} for n in range(10)])
        backlog, pending = backlog - 50 + 10, pending + 50
        if round_ == rounds // 2:  # retention trims acknowledged entries, below the group
            client.xack(keys.stream, keys.group, *ids[:1000])
            client.xtrim(keys.stream, minid=ids[1000], approximate=False)
            pending -= 1000
        if round_ == rounds // 4:  # an operator deletes one more entry ahead of the group
            client.xdel(keys.stream, ids[BIG + BIG // 3])
            backlog, removed = backlog - 1, 1

    one_count = BIG // COUNT_PAGE + 1  # the XRANGE pages of one count of half the stream
    assert _xrange_calls(client) <= one_count + rounds  # plus one page of progress a round


def test_a_figure_made_high_by_an_xdel_is_recounted_by_one_process_after_the_interval(
    redis_client: RedisClient, tx_keys: StreamKeys
) -> None:
    client, keys = redis_client, tx_keys
    ensure_group(client, keys)
    ids = _fill(client, keys, 3000)
    client.xreadgroup(keys.group, "reader", {keys.stream: ">"}, count=1000)
    client.xdel(keys.stream, ids[2000])
    now = 1_000_000.0
    assert measure_lag(client, keys, clock=lambda: now).backlog == 1999  # counted

    client.xdel(keys.stream, ids[2500])  # ahead of the group and of the last tombstone
    assert measure_lag(client, keys, clock=lambda: now + 1).backlog == 1999  # high by one

    later = now + RECOUNT_INTERVAL_S
    assert measure_lag(client, keys, clock=lambda: later).backlog == 1998  # recounted
    client.xdel(keys.stream, ids[2600])
    # Another process within the interval: the claim is taken, it derives (high by one).
    assert measure_lag(client, keys, clock=lambda: later + RECOUNT_INTERVAL_S).backlog == 1998


@pytest.mark.parametrize(
    ("base", "shards", "lag"),
    [
        (0, [], 0),  # one shard: no shards given, the stream's own figure
        (7, [], 7),
        (0, [10, 10, 10], 30),  # even: the sum
        (0, [30, 0, 0], 90),  # one hot shard: three times its lag, not 30
        (5, [30, 0, 0], 95),  # the base key's backlog (to be forwarded) on top
        (0, [12, 10, 8], 36),  # uneven: the worst shard's seconds of work
        (0, [0, 0, 0], 0),
    ],
)
def test_a_sharded_streams_lag_is_its_latest_shard_at_an_even_share(
    base: int, shards: list[int], lag: int
) -> None:
    assert whole_stream_lag(base, shards) == lag
