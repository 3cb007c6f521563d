"""Raising a stream's shard count (``sharding.resize``): refused from a table of states;
on a real server, a drained 2-shard stream switched to 3 keeps its tags, every marker of
a key that moves is copied to its new shard, and a key published again after the switch
gets no second effect there."""

from __future__ import annotations

import dataclasses

import pytest

from sentinel_platform.registry import TRANSACTIONS
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import shard_keys
from sentinel_platform.streams.sharding.record import recorded_tags
from sentinel_platform.streams.sharding.resize import (
    ResizeRefused,
    ShardState,
    problems,
    raise_shards,
)
from sentinel_platform.streams.sharding.routing import shard_of
from sentinel_platform.streams.sharding.shards import keys_of_shards
from sentinel_platform_tests.harness.consumers import MakeConsumer
from sentinel_platform_tests.harness.streams import publish

DRAINED = [ShardState("s0", 0, 0), ShardState("s1", 0, 0)]


@pytest.mark.parametrize(
    ("recorded", "declared", "states", "found"),
    [
        (2, 3, DRAINED, []),
        (2, 2, DRAINED, ["2 shards are recorded already: nothing to raise"]),
        (3, 2, DRAINED, ["the shard count can only be raised (3 recorded, 2 declared)"]),
        (
            2,
            4,
            [ShardState("s0", 5, 0), ShardState("s1", 0, 1)],
            [
                "s0: lag 5, drain it first",
                "s1: 1 live worker(s), stop them",
            ],
        ),
    ],
)
def test_a_switch_needs_a_higher_count_a_drained_stream_and_no_worker(
    recorded: int, declared: int, states: list[ShardState], found: list[str]
) -> None:
    assert problems(recorded, declared, states) == found


def test_a_drained_stream_is_switched_with_its_markers_and_applies_no_key_twice(
    settings: Settings, redis_client: RedisClient, make_consumer: MakeConsumer
) -> None:
    two, three = (dataclasses.replace(TRANSACTIONS, shards=n) for n in (2, 3))
    stream = TRANSACTIONS.stream_key(settings)
    old = keys_of_shards(redis_client, settings, two)
    keys = [f"k{n}" for n in range(40)]
    for shard, keys_of in enumerate(old):  # each key applied on its shard of two
        publish(redis_client, keys_of, [{"key": k} for k in keys if shard_of(k, 2) == shard])
        assert make_consumer(f"c{shard}", keys_for=lambda _s, k=keys_of: k).run(burst=True) == 0
    with pytest.raises(ResizeRefused, match="live worker"):
        raise_shards(redis_client, settings, three, [ShardState("s", 0, 1)])

    done = raise_shards(redis_client, settings, three, [ShardState("s", 0, 0)])
    tags = recorded_tags(redis_client, stream, 3)
    assert (done.before, done.after, done.tags) == (2, 3, tags)
    assert [shard_keys(settings, three, t) for t in tags[:2]] == list(old)  # same keys
    new = keys_of_shards(redis_client, settings, three)
    moving = [k for k in keys if shard_of(k, 3) != shard_of(k, 2)]
    assert moving and done.markers_moved == len(moving)
    for key in keys:
        assert redis_client.exists(new[shard_of(key, 3)].marker(key)), key
        assert redis_client.pttl(new[shard_of(key, 3)].marker(key)) > 0

    target = new[shard_of(moving[0], 3)]
    publish(redis_client, target, [{"key": moving[0]}])  # sent again after the switch
    before = redis_client.xlen(target.results)
    assert make_consumer("c9", keys_for=lambda _s: target).run(burst=True) == 0
    assert redis_client.xlen(target.results) == before  # acknowledged, no second effect
