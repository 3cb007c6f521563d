"""A sharded stream's wire frame carries each exact row's shard, computed in the JVM, and
it is the shard Python gives the entry's natural key (``sharding.routing.shard_of``): the
number the executors route by is the workers' and the forwarder's."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from sentinel_platform.registry import AXIOMS, TRANSACTIONS, StreamSpec
from sentinel_platform.resources.wire_columns import wire_frame
from sentinel_platform.streams.producer.publish import EXACT_COLUMN, frame_entries
from sentinel_platform.streams.producer.routed_publish import SHARD_COLUMN
from sentinel_platform.streams.sharding.routing import shard_of
from sentinel_platform_tests.resources.test_wire_rows import (
    AXIOM_SCHEMA,
    TXN_SCHEMA,
    _axiom_rows,
    _transaction_rows,
)

pytestmark = pytest.mark.spark

SHARDS = 5
#: Keys beyond ASCII: the JVM's CRC-32 must be of the same UTF-8 bytes as Python's.
WIDE_IDS = ("caf\u00e9-1", "\u65e5\u672c-2", "\U0001f600-3", 'q"uote-4', "back\\slash-5")


def _transactions() -> list[tuple[Any, ...]]:
    rows = _transaction_rows(400, seed=21)
    template = rows[0]
    return rows + [(key, *template[1:]) for key in WIDE_IDS]


def _axioms() -> list[tuple[Any, ...]]:
    rows = _axiom_rows(400, seed=22)
    template = rows[0]
    return rows + [(*template[:3], key, *template[4:]) for key in WIDE_IDS]


@pytest.mark.parametrize(
    ("spec", "schema", "rows"),
    [(TRANSACTIONS, TXN_SCHEMA, _transactions), (AXIOMS, AXIOM_SCHEMA, _axioms)],
    ids=["transactions", "axioms"],
)
def test_the_jvm_gives_each_exact_row_the_shard_of_its_natural_key(
    spark: Any, spec: StreamSpec, schema: str, rows: Any
) -> None:
    sharded = dataclasses.replace(spec, shards=SHARDS)
    collected = wire_frame(spark.createDataFrame(rows(), schema), sharded).collect()
    columns = [[row[name] for row in collected] for name in spec.wire_fields]
    exact = [row[EXACT_COLUMN] for row in collected]
    entries = list(frame_entries(spec, columns, exact))
    shards = [row[SHARD_COLUMN] for row in collected]

    expected = [shard_of(spec.wire_model.from_fields(e).natural_key, SHARDS) for e in entries]
    assert [s for s, ok in zip(shards, exact, strict=True) if ok] == [
        want for want, ok in zip(expected, exact, strict=True) if ok
    ]
    assert all(s is None for s, ok in zip(shards, exact, strict=True) if not ok)
    assert sum(exact) > 400  # the ordinary rows and the wide keys routed by the JVM
    assert set(shards) >= set(range(SHARDS))


def test_a_stream_of_one_shard_keeps_todays_frame(spark: Any) -> None:
    frame = wire_frame(
        spark.createDataFrame(_transaction_rows(3, seed=1), TXN_SCHEMA), TRANSACTIONS
    )
    assert frame.columns == [*TRANSACTIONS.wire_fields, EXACT_COLUMN]
