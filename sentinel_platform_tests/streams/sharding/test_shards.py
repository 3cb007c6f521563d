"""The keys of every shard of a declared stream (``sharding.shards``), on a real server:
one shard is the stream's own keys with nothing written; N shards are those of the
recorded tags, the same for every caller; another count is refused."""

from __future__ import annotations

import dataclasses

import pytest

from sentinel_platform.registry import TRANSACTIONS
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import keys_for, shard_keys
from sentinel_platform.streams.sharding.record import ShardCountChanged, record_key
from sentinel_platform.streams.sharding.shards import keys_of_shards


def test_one_shard_is_the_streams_own_keys_and_records_nothing(
    settings: Settings, redis_client: RedisClient
) -> None:
    assert keys_of_shards(redis_client, settings, TRANSACTIONS) == (
        keys_for(settings, TRANSACTIONS),
    )
    assert redis_client.keys("sentinel:shards:*") == []


def test_n_shards_are_the_keys_of_the_recorded_tags_for_every_caller(
    settings: Settings, redis_client: RedisClient
) -> None:
    spec = dataclasses.replace(TRANSACTIONS, shards=3)
    first = keys_of_shards(redis_client, settings, spec)
    stream = TRANSACTIONS.stream_key(settings)
    assert [k.stream for k in first] == [f"{stream}:{{{stream}~{n}}}" for n in range(3)]
    assert first == tuple(shard_keys(settings, spec, "{" + k.stream.split("{")[1]) for k in first)
    assert keys_of_shards(redis_client, settings, spec) == first
    assert redis_client.exists(record_key(stream))

    with pytest.raises(ShardCountChanged, match="recorded with 3 shard"):
        keys_of_shards(redis_client, settings, dataclasses.replace(spec, shards=4))
