"""Shard tags spread a stream over the masters (:mod:`.placement` of the sharding group):
tables of cluster layouts, then a real 3-primary Redis Cluster."""

from __future__ import annotations

import itertools
from collections import Counter
from typing import Any

import pytest

from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.sharding.placement import (
    Master,
    choose_tags,
    masters_from_shards,
    placement,
    shard_tag,
    tag_slot,
)

EVEN = [
    Master("a:1", ((0, 5460),)),
    Master("b:2", ((5461, 10922),)),
    Master("c:3", ((10923, 16383),)),
]


@pytest.mark.parametrize(
    ("masters", "count", "expected"),
    [
        pytest.param(EVEN, 3, {"a:1": [0], "b:2": [1], "c:3": [2]}, id="one shard a master"),
        pytest.param(EVEN, 1, {"a:1": [0], "b:2": [], "c:3": []}, id="more masters than shards"),
        pytest.param(EVEN[:2], 3, {"a:1": [0, 2], "b:2": [1]}, id="fewer masters: round"),
        pytest.param(EVEN, 6, {"a:1": [0, 3], "b:2": [1, 4], "c:3": [2, 5]}, id="two each"),
        pytest.param(
            [Master("a:1", ((0, 16382),)), Master("b:2", ((16383, 16383),))],
            2,
            {"a:1": [0], "b:2": [1]},
            id="a master of one slot",
        ),
        pytest.param(
            [Master("a:1", ((0, 100), (9000, 16383))), Master("b:2", ((101, 8999),))],
            4,
            {"a:1": [0, 2], "b:2": [1, 3]},
            id="split ranges",
        ),
    ],
)
def test_each_shard_lands_on_the_master_it_was_given(
    masters: list[Master], count: int, expected: dict[str, list[int]]
) -> None:
    tags = choose_tags("transactions", count, masters)
    assert len(set(tags)) == count
    assert placement(tags, masters) == expected
    assert choose_tags("transactions", count, masters) == tags  # the same layout, the same tags


def test_tags_are_per_shard_never_per_stream() -> None:
    """A tag shared by the shards (``{stream}`` in every key) would put them in one slot."""
    tags = choose_tags("transactions", 3, EVEN)
    assert len({tag_slot(tag) for tag in tags}) == 3
    assert all(tag.startswith("{transactions~") and tag.endswith("}") for tag in tags)


def test_unchosen_tags_share_a_master_most_of_the_time() -> None:
    """Why the tags are chosen: the plain ``{<stream>~<k>}`` of three shards, over 300
    stream names, leave some master two shards about half the time (random tags: 21 in 27),
    and the chosen ones never do."""
    shared = 0
    for n in range(300):
        tags = [shard_tag(f"stream-{n}", k) for k in range(3)]
        homes = Counter(next(m.address for m in EVEN if m.serves(tag_slot(t))) for t in tags)
        shared += max(homes.values()) > 1
    assert shared / 300 > 0.4
    chosen = [placement(choose_tags(f"stream-{n}", 3, EVEN), EVEN) for n in range(300)]
    assert all(sorted(map(len, found.values())) == [1, 1, 1] for found in chosen)


def test_a_shard_whose_slot_no_master_serves_is_listed_apart() -> None:
    tags = choose_tags("transactions", 3, EVEN)
    assert placement(tags, EVEN[1:]) == {"b:2": [1], "c:3": [2], "": [0]}


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        pytest.param(
            [
                {
                    "slots": [(5461, 10922)],
                    "nodes": [{"role": "master", "ip": "10.0.0.2", "port": 7001}],
                },
                {
                    "slots": [(0, 5460)],
                    "nodes": [
                        {"role": "replica", "ip": "10.0.0.9", "port": 7009},
                        {"role": "master", "ip": "10.0.0.1", "port": 7000},
                    ],
                },
            ],
            [Master("10.0.0.1:7000", ((0, 5460),)), Master("10.0.0.2:7001", ((5461, 10922),))],
            id="pairs, sorted by first slot, replicas skipped",
        ),
        pytest.param(
            [{"slots": [0, 10, 20, 30], "nodes": [{"role": b"master", "ip": b"h", "port": 1}]}],
            [Master("h:1", ((0, 10), (20, 30)))],
            id="a flat list of bounds, bytes values",
        ),
        pytest.param(
            [{"slots": [], "nodes": [{"role": "master", "ip": "h", "port": 1}]}],
            [],
            id="a master without slots serves no shard",
        ),
    ],
)
def test_masters_are_read_from_cluster_shards(reply: list[Any], expected: list[Master]) -> None:
    assert masters_from_shards(reply) == expected


@pytest.mark.parametrize(
    ("count", "masters", "message"),
    [(0, EVEN, "at least one shard"), (3, [], "no master")],
)
def test_impossible_placements_are_refused(count: int, masters: list[Master], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        choose_tags("transactions", count, masters)


@pytest.mark.cluster
def test_three_shards_live_on_the_three_masters_of_a_real_cluster(
    cluster_client: RedisClient,
) -> None:
    masters = masters_from_shards(cluster_client.cluster_shards())
    assert len(masters) == 3
    tags = choose_tags("transactions", 3, masters)
    for tag in tags:
        cluster_client.xadd(tag, {"data": "{}"})
        cluster_client.xadd(f"{tag}:dlq", {"data": "{}"})  # a shard's keys share its slot
    homes = {cluster_client.get_node_from_key(tag).name for tag in tags}
    assert homes == {master.address for master in masters}
    for tag, node in itertools.product(tags, ["", ":dlq"]):
        assert cluster_client.keyslot(f"{tag}{node}") == tag_slot(tag)
