"""Spark publishes both streams into a Redis Cluster, each onto its own shard, and reads back.

The publisher resource is the one the assets use; its executors open cluster clients
from plain config, follow the slot map to the shard that owns each stream, and the
read-back splits a stream's id range across Spark partitions on the cluster too.
"""

from __future__ import annotations

from datetime import date
from typing import Any

import pytest

from sentinel_platform.domains.shared.generation import generate_transactions
from sentinel_platform.resources.redis_publisher import RedisPublisherResource
from sentinel_platform.schemas import Axiom, Transaction
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import axiom_keys, transaction_keys
from sentinel_platform_tests.harness.redis_cluster import RedisClusterProcess

pytestmark = [pytest.mark.cluster, pytest.mark.spark]

DAY = date(2026, 11, 20)


@pytest.fixture
def publisher(cluster_settings: Settings) -> RedisPublisherResource:
    # No workers here: thresholds high enough that the measured backlog never pauses.
    return RedisPublisherResource(
        redis_url=cluster_settings.redis_url_value, lag_warn=99_999, lag_pause=100_000
    )


AXIOM_SCHEMA = (
    "status string, metric_value double, anomaly_score double, source_id string, "
    "emitted_at string, domain string"
)


def axiom_rows(count: int) -> list[tuple[object, ...]]:
    """Wire-format axioms: three sensors, one reading a minute (distinct natural keys)."""
    return [
        (
            "critical" if i % 5 == 0 else "degraded",
            50.0 + i,
            round(0.5 + (i % 50) / 100, 2),
            f"aml-sensor-{i % 3:02d}",
            f"2026-11-20T10:{i // 3:02d}:00+00:00",
            "aml",
        )
        for i in range(count)
    ]


def stream_length_on_node(cluster: RedisClusterProcess, port: int, stream: str) -> int:
    """XLEN asked of one node directly (a node that does not own the slot answers MOVED)."""
    with cluster.node_client(port) as node:
        return int(node.xlen(stream))


def test_spark_publishes_each_stream_onto_the_shard_that_owns_its_slot(
    spark: Any,
    redis_cluster: RedisClusterProcess,
    cluster_settings: Settings,
    cluster_client: RedisClient,
    publisher: RedisPublisherResource,
) -> None:
    tx, ax = transaction_keys(cluster_settings), axiom_keys(cluster_settings)
    transactions = generate_transactions(spark, DAY, 1_000, seed=3, partitions=4)
    axioms = spark.createDataFrame(axiom_rows(60), AXIOM_SCHEMA).repartition(2)
    expected_axioms = 60

    tx_stats = publisher.publish_dataframe(transactions, "transactions")
    ax_stats = publisher.publish_dataframe(axioms, "axioms")

    assert (tx_stats.rows, tx_stats.partitions) == (1_000, 4)
    assert ax_stats.rows == expected_axioms > 0
    tx_owner, ax_owner = (
        redis_cluster.port_for_key(tx.stream),
        redis_cluster.port_for_key(ax.stream),
    )
    assert tx_owner != ax_owner
    assert stream_length_on_node(redis_cluster, tx_owner, tx.stream) == 1_000
    assert stream_length_on_node(redis_cluster, ax_owner, ax.stream) == expected_axioms

    published_ids = {Transaction.from_fields(f).id for _i, f in cluster_client.xrange(tx.stream)}
    assert published_ids == {row.id for row in transactions.select("id").collect()}
    assert {Axiom.from_fields(f).natural_key for _i, f in cluster_client.xrange(ax.stream)} == {
        Axiom.model_validate(row.asDict()).natural_key for row in axioms.collect()
    }
    assert (tx_stats.first_id, tx_stats.last_id) == (
        cluster_client.xrange(tx.stream, count=1)[0][0],
        cluster_client.xrevrange(tx.stream, count=1)[0][0],
    )


def test_spark_reads_a_stream_back_from_the_cluster_split_by_id_range(
    spark: Any,
    cluster_settings: Settings,
    cluster_client: RedisClient,
    publisher: RedisPublisherResource,
) -> None:
    tx = transaction_keys(cluster_settings)
    publisher.publish_dataframe(
        generate_transactions(spark, DAY, 500, seed=5, partitions=2), "transactions"
    )
    frame = publisher.read_stream(spark, tx.stream)
    rows = frame.collect()
    assert frame.rdd.getNumPartitions() >= 1
    assert sorted(r[0] for r in rows) == sorted(i for i, _f in cluster_client.xrange(tx.stream))
