"""A sharded stream's executor side on one real server (the shards share it, as on a
development machine): every entry lands on the shard of its natural key by the
hand-encoded sender, a shard given with an entry is kept, and the rows each shard got
are counted for the publish's metadata."""

from __future__ import annotations

from typing import Any

from sentinel_platform.registry import TRANSACTIONS, StreamSpec
from sentinel_platform.schemas import Transaction
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import keys_for
from sentinel_platform.streams.producer.pacing_limits import BackpressureConfig
from sentinel_platform.streams.producer.partition_publisher import PartitionPublisher
from sentinel_platform.streams.producer.routed_publish import routed
from sentinel_platform.streams.sharding.routing import shard_of
from sentinel_platform.streams.sharding.shards import keys_of_shards

ROWS = 60


def _row(n: int) -> dict[str, Any]:
    return {
        "id": f"txn-{n:04d}",
        "merchant": "m",
        "category": "retail",
        "currency": "USD",
        "amount": 1.5 + n,
        "message": "",
        "is_threat": False,
        "source": "test",
        "timestamp": "2026-11-28T00:00:00Z",
    }


def test_each_entry_lands_on_the_shard_of_its_key_and_each_shard_is_counted(
    redis_client: RedisClient, settings: Settings, sharded_stream: StreamSpec
) -> None:
    shards = keys_of_shards(redis_client, settings, sharded_stream)
    publisher = PartitionPublisher(
        url=settings.redis_url_value,
        cluster=False,
        keys=keys_for(settings, sharded_stream),
        spec=sharded_stream,
        config=BackpressureConfig(lag_warn=10_000, lag_pause=20_000),
        batch_size=7,  # batches that span the shards
        shards=shards,
    )
    stats = publisher.publish(_row(n) for n in range(ROWS))

    on_shard = [
        [Transaction.from_fields(f).id for _id, f in redis_client.xrange(s.stream)] for s in shards
    ]
    for k, ids in enumerate(on_shard):
        assert ids and {shard_of(i, len(shards)) for i in ids} == {k}
        assert ids == sorted(ids)  # one key's order, and the partition's, kept per shard
    assert stats.rows == ROWS and stats.rows_per_shard == [len(ids) for ids in on_shard]
    assert (stats.first_id, stats.last_id) == (None, None)  # ids of three streams
    assert redis_client.xlen(keys_for(settings, sharded_stream).stream) == 0


def test_a_given_shard_is_kept_and_a_missing_one_is_the_keys() -> None:
    fields = Transaction.model_validate(_row(1)).to_fields()
    key_shard = shard_of("txn-0001", 3)
    given = (key_shard + 1) % 3  # not the key's: kept as the JVM gave it
    pairs = [(fields, given), (fields, None)]
    assert [shard for shard, _fields in routed(TRANSACTIONS, pairs, 3)] == [given, key_shard]
