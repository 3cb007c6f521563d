"""The record of a stream's shards: checked from a table of records, then chosen once and
shared on a real server and a real 3-primary cluster, by processes racing to choose."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.sharding.placement import masters_from_shards, placement
from sentinel_platform.streams.sharding.record import (
    ShardCountChanged,
    record_key,
    recorded_tags,
    tags_from_record,
)


def _record(count: Any, tags: Any) -> str:
    return json.dumps({"count": count, "tags": tags})


@pytest.mark.parametrize(
    ("raw", "count", "expected"),
    [
        (_record(1, ["{tx~0}"]), 1, ("{tx~0}",)),
        (_record(3, ["{tx~0}", "{tx~1.17}", "{tx~2.4}"]), 3, ("{tx~0}", "{tx~1.17}", "{tx~2.4}")),
        (_record(2, ["{tx~0}", "{tx~1}"]).encode(), 2, ("{tx~0}", "{tx~1}")),
    ],
)
def test_a_record_gives_its_tags(raw: str | bytes, count: int, expected: tuple[str, ...]) -> None:
    assert tags_from_record(raw, "tx", count) == expected


@pytest.mark.parametrize(
    ("raw", "count", "error", "message"),
    [
        (_record(3, ["{tx~0}", "{tx~1}", "{tx~2}"]), 4, ShardCountChanged, "recorded with 3"),
        (_record(2, ["{tx~0}", "{tx~1}"]), 1, ShardCountChanged, "and 1 were asked for"),
        (_record(2, ["{tx~0}"]), 2, ValueError, "not 2 shards of tx"),
        (_record(2, ["{tx~1}", "{tx~0}"]), 2, ValueError, "not 2 shards of tx"),  # order
        (_record(1, ["{other~0}"]), 1, ValueError, "not 1 shards of tx"),
        (_record(1, ["{tx~0.}x"]), 1, ValueError, "not 1 shards of tx"),
        (_record(1, ["{tx~0.a1}"]), 1, ValueError, "not 1 shards of tx"),
        (_record(1, ["{tx~0.}"]), 1, ValueError, "not 1 shards of tx"),
        ("not json", 1, ValueError, "sentinel:shards:tx is not a record of shards"),
        (json.dumps({"tags": []}), 1, ValueError, "not a record of shards"),
    ],
)
def test_a_record_that_does_not_match_is_refused_naming_the_key(
    raw: str, count: int, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        tags_from_record(raw, "tx", count)


def test_the_record_is_chosen_once_on_a_single_server(redis_client: RedisClient) -> None:
    tags = recorded_tags(redis_client, "orders", 3)
    assert tags == ("{orders~0}", "{orders~1}", "{orders~2}")  # one "master": no salt needed
    assert json.loads(redis_client.get(record_key("orders")) or "") == {
        "count": 3,
        "tags": list(tags),
    }
    assert recorded_tags(redis_client, "orders", 3) == tags
    with pytest.raises(ShardCountChanged, match="'orders' is recorded with 3 shard"):
        recorded_tags(redis_client, "orders", 4)


@pytest.mark.cluster
def test_racing_processes_on_a_real_cluster_all_use_the_first_record(
    cluster_client: RedisClient,
) -> None:
    """Eight callers at once, each its own connection: one record is written, every
    caller returns it, and its three shards live on the three masters."""
    barrier = threading.Barrier(8)
    found: list[tuple[str, ...]] = []

    def choose() -> None:
        barrier.wait(10)
        found.append(recorded_tags(cluster_client, "orders", 3))

    threads = [threading.Thread(target=choose) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(found) == 8 and len(set(found)) == 1, found
    masters = masters_from_shards(cluster_client.cluster_shards())
    where = placement(found[0], masters)
    assert sorted(len(shards) for shards in where.values()) == [1, 1, 1], where


@pytest.mark.cluster
def test_a_recorded_layout_is_kept_when_the_cluster_would_choose_otherwise(
    cluster_client: RedisClient,
) -> None:
    """A record written before a resharding (here: by hand, plain tags) is what every
    process uses afterwards, whatever the layout would choose now."""
    plain = ["{orders~0}", "{orders~1}"]
    cluster_client.set(record_key("orders"), _record(2, plain))
    assert recorded_tags(cluster_client, "orders", 2) == tuple(plain)
