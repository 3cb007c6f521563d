"""What the workers publish they hold in flight, against a real Redis: the pool's allowance.

The figures are written the way a worker's lag side write sends them (queued on the same
pipeline as the lag key and the peaks record, one round trip) and read the way
``sentinel status``, the lag sensor, the checks and the producers read them.
"""

from __future__ import annotations

import pytest
import redis
from redis.crc import key_slot

from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.holdings import (
    Holdings,
    most_held,
    publish_holding,
    queue_forget_holding,
    queue_holding,
    read_allowance,
    read_holdings,
)
from sentinel_platform.streams.backlog.lag import queue_lag_key, read_lag_key
from sentinel_platform.streams.backlog.peaks import queue_record_lag
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import (
    StreamKeys,
    holding_key,
    holdings_key,
    transaction_keys,
)
from sentinel_platform_tests.harness.waits import wait_until

#: The least-privilege user of docs/configuration.md (no ``+@set``, no ``+@generic``).
PLATFORM_ACL = (
    "~transactions", "~synapse:*", "~sentinel:*", "~{*}*", "-@all", "+@stream", "+@string",
    "+@hash", "+@list", "+@sortedset", "+@keyspace", "+@scripting", "+@connection",
    "+@transaction", "-@dangerous", "+info",
)  # fmt: skip


@pytest.fixture
def keys(settings: Settings) -> StreamKeys:
    return transaction_keys(settings)


def _side_write(client: RedisClient, keys: StreamKeys, consumer: str, lag: int, limit: int) -> int:
    """A worker's lag side write with its holding queued beside it; the replies it got."""
    pipe = client.pipeline(transaction=False)
    queue_lag_key(pipe, keys, lag, 10)
    queue_record_lag(pipe, keys, lag)
    queue_holding(pipe, keys, consumer, limit, 10)
    return len(pipe.execute())


def test_each_worker_publishes_on_its_lag_write_and_the_pool_sums_the_live_ones(
    redis_client: RedisClient, keys: StreamKeys
) -> None:
    assert read_holdings(redis_client, keys) == Holdings()
    assert read_allowance(redis_client, keys) == 0  # no worker published: all is pressure

    replies = _side_write(redis_client, keys, "worker-a", lag=7, limit=8)
    _side_write(redis_client, keys, "worker-b", lag=9, limit=32)

    assert replies == 1 + 2 + 5, "one pipeline: lag key, peaks, then the holding and climb"
    assert read_holdings(redis_client, keys).by_consumer == {"worker-a": 8, "worker-b": 32}
    assert read_allowance(redis_client, keys) == 40
    assert read_lag_key(redis_client, keys) == 9, "the lag key stays Sentinel-L7's integer"
    assert redis_client.get(keys.lag) == "9"
    assert 0 < redis_client.ttl(holding_key(keys, "worker-a")) <= 10


def test_a_new_figure_replaces_the_workers_old_one(
    redis_client: RedisClient, keys: StreamKeys
) -> None:
    publish_holding(redis_client, keys, "worker-a", 32, 10)
    publish_holding(redis_client, keys, "worker-a", 5, 10)  # its limit was lowered
    assert read_allowance(redis_client, keys) == 5


def test_a_dead_workers_share_lapses_with_its_ttl_and_its_name_is_pruned(
    redis_client: RedisClient, keys: StreamKeys
) -> None:
    publish_holding(redis_client, keys, "lives", 8, 60)
    publish_holding(redis_client, keys, "dies", 100, 1)  # last: must not shorten the index
    assert read_allowance(redis_client, keys) == 108

    wait_until(lambda: read_allowance(redis_client, keys) == 8, 10, what="the share lapsed")
    assert redis_client.zrange(holdings_key(keys), 0, -1) == ["lives"]
    assert redis_client.ttl(holdings_key(keys)) > 0, "the index lapses with its last writer"


def test_a_worker_that_stops_cleanly_no_longer_counts_at_once(
    redis_client: RedisClient, keys: StreamKeys
) -> None:
    publish_holding(redis_client, keys, "worker-a", 8, 60)
    publish_holding(redis_client, keys, "worker-b", 4, 60)
    pipe = redis_client.pipeline(transaction=False)
    queue_forget_holding(pipe, keys, "worker-a")
    pipe.execute()
    assert read_holdings(redis_client, keys).by_consumer == {"worker-b": 4}


def test_a_figure_that_is_not_a_number_counts_nothing(
    redis_client: RedisClient, keys: StreamKeys
) -> None:
    publish_holding(redis_client, keys, "worker-a", 8, 60)
    publish_holding(redis_client, keys, "broken", 8, 60)
    redis_client.set(holding_key(keys, "broken"), "lots", ex=60)
    assert read_holdings(redis_client, keys).by_consumer == {"worker-a": 8}


@pytest.mark.parametrize(("limit", "ttl_s"), [(-1, 10), (8, 0)])
def test_a_bad_figure_is_refused_before_anything_is_queued(
    redis_client: RedisClient, keys: StreamKeys, limit: int, ttl_s: int
) -> None:
    pipe = redis_client.pipeline(transaction=False)
    with pytest.raises(ValueError, match=r"limit|ttl_s"):
        queue_holding(pipe, keys, "worker-a", limit, ttl_s)
    assert len(pipe) == 0


def test_the_documented_least_privilege_user_publishes_reads_and_prunes(
    redis_client: RedisClient, keys: StreamKeys, settings: Settings
) -> None:
    redis_client.execute_command(
        "ACL", "SETUSER", "limited", "reset", "on", ">limited-Pw-77", *PLATFORM_ACL
    )
    limited = redis.Redis.from_url(
        settings.redis_url_value or "", username="limited", password="limited-Pw-77",
        decode_responses=True,
    )  # fmt: skip
    try:
        publish_holding(limited, keys, "worker-a", 8, 60)
        publish_holding(limited, keys, "dies", 3, 1)
        wait_until(lambda: read_allowance(limited, keys) == 8, 10, what="pruned as the user")
        assert redis_client.zrange(holdings_key(keys), 0, -1) == ["worker-a"]
    finally:
        limited.close()
        redis_client.execute_command("ACL", "DELUSER", "limited")


def test_the_keys_sit_beside_the_lag_key_in_the_streams_slot(settings: Settings) -> None:
    single = transaction_keys(settings)
    assert holdings_key(single) == f"sentinel:holdings:{single.stream}"
    assert holding_key(single, "w-1") == f"sentinel:holding:{single.stream}:w-1"
    cluster = transaction_keys(settings.model_copy(update={"redis_cluster": True}))
    assert holdings_key(cluster) == f"{{{cluster.stream}}}:holdings"
    slot = key_slot(cluster.stream.encode())
    assert key_slot(holdings_key(cluster).encode()) == slot
    assert key_slot(holding_key(cluster, "host-1234-ab").encode()) == slot


@pytest.mark.parametrize(
    ("read_count", "concurrency", "expected"),
    [
        (100, 1, 100),  # calls inline: the whole read is held
        (100, 8, 12),  # threads and a read-ahead of half as many (slow calls)
        (100, 32, 48),
        (100, 90, 100),  # never more than the larger of the limit and a read
        (10, 128, 128),  # several reads fill the threads
    ],
)
def test_most_held_by_one_pinned_worker(read_count: int, concurrency: int, expected: int) -> None:
    assert most_held(read_count, concurrency) == expected
