"""A row's shard (:mod:`~sentinel_platform.streams.sharding.routing`): stable, spread, and
the same number in Spark's JVM as in Python."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from sentinel_platform.streams.sharding.routing import shard_column, shard_of

KEYS = ["txn-00000001", "txn-20261126-00000042", "AX-9", "", "é-ünïcode-ключ", "a" * 300]


@pytest.mark.parametrize("count", [1, 2, 3, 7])
def test_a_key_always_has_the_same_shard_within_the_count(count: int) -> None:
    for key in KEYS:
        shard = shard_of(key, count)
        assert 0 <= shard < count and shard_of(key, count) == shard


def test_keys_spread_evenly_over_three_shards() -> None:
    per_shard = Counter(shard_of(f"txn-{n:08d}", 3) for n in range(30_000))
    assert sorted(per_shard) == [0, 1, 2]
    assert max(per_shard.values()) / min(per_shard.values()) < 1.05


def test_a_shard_count_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least one shard"):
        shard_of("txn-1", 0)


def test_spark_routes_each_key_to_the_shard_python_gives(spark: Any) -> None:
    frame = spark.createDataFrame([(key,) for key in KEYS], "txn_id string")
    for count in (1, 3, 7):
        rows = frame.select("txn_id", shard_column(frame["txn_id"], count).alias("shard"))
        found = {row["txn_id"]: row["shard"] for row in rows.collect()}
        assert found == {key: shard_of(key, count) for key in KEYS}
