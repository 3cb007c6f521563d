"""Spark publishes a sharded stream by natural key: each row straight to its key's shard.

The publisher resource the assets use, on the suite's real 3-master cluster: the driver
names the shards from the record, the JVM computes each exact row's shard, the executors
route the rest by the wire model's own key, and nothing goes through the base key (which
the workers would only forward). Every copy of a key so lands on the shard whose markers
give it one effect, the shard the workers' forwarder and a raise of the count compute.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import date
from typing import Any

import pytest

from sentinel_platform.domains.shared.generation import generate_transactions
from sentinel_platform.registry import AXIOMS, StreamSpec, register, unregister
from sentinel_platform.resources.redis_publisher import RedisPublisherResource
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, keys_for
from sentinel_platform.streams.plumbing.replies import entries
from sentinel_platform.streams.producer.lanes import lane_keys
from sentinel_platform.streams.producer.publish import PublishStats
from sentinel_platform.streams.sharding.routing import shard_of
from sentinel_platform.streams.sharding.shards import keys_of_shards
from sentinel_platform_tests.harness.redis_cluster import RedisClusterProcess
from sentinel_platform_tests.resources.test_redis_publisher_on_cluster import (
    AXIOM_SCHEMA,
    axiom_rows,
)

pytestmark = [pytest.mark.cluster, pytest.mark.spark]

DAY = date(2026, 11, 27)


@pytest.fixture
def sharded_axioms() -> Iterator[StreamSpec]:
    """The axioms' declaration over three shards, for this test's process only."""
    spec = dataclasses.replace(
        AXIOMS,
        name="sharded_axioms",
        stream="sharded:axioms",
        group="sharded-axiom-workers",
        results="sharded:axiom-results",
        recent=None,
        asset="sharded_axioms",
        publish_job="publish_sharded_axioms",
        worker_prefix="sax",
        workers_option=None,
        shards=3,
    )
    yield register(spec)
    unregister(spec.name)


@pytest.fixture
def publisher(cluster_settings: Settings) -> RedisPublisherResource:
    # No workers here: thresholds the measured backlog never reaches.
    return RedisPublisherResource(
        redis_url=cluster_settings.redis_url_value, lag_warn=99_999, lag_pause=100_000
    )


def _keys_by_shard(
    client: RedisClient, spec: StreamSpec, shards: tuple[StreamKeys, ...]
) -> list[list[str]]:
    """The natural keys on each shard, in each shard's order."""
    return [
        [
            spec.wire_model.from_fields(fields).natural_key
            for _id, fields in entries(client.xrange(s.stream))
        ]
        for s in shards
    ]


def _assert_routed(
    client: RedisClient,
    cluster: RedisClusterProcess,
    settings: Settings,
    spec: StreamSpec,
    stats: PublishStats,
    expected: set[str],
) -> None:
    shards = keys_of_shards(client, settings, spec)
    on_shards = _keys_by_shard(client, spec, shards)
    for k, keys in enumerate(on_shards):
        assert keys, f"shard {k} got nothing"
        assert {shard_of(key, len(shards)) for key in keys} == {k}, f"shard {k} got others' rows"
    assert sorted(key for keys in on_shards for key in keys) == sorted(expected)
    assert stats.rows_per_shard == [len(keys) for keys in on_shards]
    assert client.xlen(keys_for(settings, spec).stream) == 0  # nothing left to forward
    assert len({cluster.port_for_key(s.stream) for s in shards}) == len(shards)


def test_spark_sends_each_row_to_the_shard_of_its_natural_key(
    spark: Any,
    redis_cluster: RedisClusterProcess,
    cluster_settings: Settings,
    cluster_client: RedisClient,
    publisher: RedisPublisherResource,
    sharded_stream: StreamSpec,
    sharded_axioms: StreamSpec,
) -> None:
    transactions = generate_transactions(spark, DAY, 2_000, seed=11, partitions=4)
    # Twelve axioms the JVM cannot vouch for (1.5e7 prints as 1.5E7 in Java): routed on
    # the executors by the wire model's key, to the same shards the JVM would choose.
    readings = axiom_rows(60) + [
        ("degraded", 1.5e7 + i, 0.5, f"far-sensor-{i}", f"2026-11-27T11:{i:02d}:00+00:00", None)
        for i in range(12)
    ]
    axioms = spark.createDataFrame(readings, AXIOM_SCHEMA).repartition(3)

    tx_stats = publisher.publish_dataframe(transactions, sharded_stream.name)
    ax_stats = publisher.publish_dataframe(axioms, sharded_axioms.name)

    ids = {row.id for row in transactions.select("id").collect()}
    assert tx_stats.rows == len(ids) == 2_000
    _assert_routed(cluster_client, redis_cluster, cluster_settings, sharded_stream, tx_stats, ids)
    expected = {AXIOMS.wire_model.model_validate(r.asDict()).natural_key for r in axioms.collect()}
    assert ax_stats.rows == len(expected) == 72
    _assert_routed(
        cluster_client, redis_cluster, cluster_settings, sharded_axioms, ax_stats, expected
    )


def test_the_batch_lane_of_a_sharded_stream_is_each_shards_own(
    spark: Any,
    cluster_settings: Settings,
    cluster_client: RedisClient,
    publisher: RedisPublisherResource,
    sharded_stream: StreamSpec,
) -> None:
    transactions = generate_transactions(spark, DAY, 300, seed=5, partitions=2)

    stats = publisher.publish_dataframe(transactions, sharded_stream.name, lane="batch")

    shards = keys_of_shards(cluster_client, cluster_settings, sharded_stream)
    lanes = tuple(lane_keys(keys, "batch") for keys in shards)
    on_lanes = _keys_by_shard(cluster_client, sharded_stream, lanes)
    for k, keys in enumerate(on_lanes):
        assert keys and {shard_of(key, len(shards)) for key in keys} == {k}
    assert sum(len(keys) for keys in on_lanes) == stats.rows == 300
    assert stats.rows_per_shard == [len(keys) for keys in on_lanes]
    assert all(cluster_client.xlen(keys.stream) == 0 for keys in shards)
    assert cluster_client.xlen(keys_for(cluster_settings, sharded_stream).stream) == 0
