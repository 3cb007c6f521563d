"""Entries built for the streams, in Python or by Spark, are exactly the wire models' bytes."""

from __future__ import annotations

import random
from typing import Any

import pydantic
import pytest
import redis
from pyspark.sql import functions as F

from sentinel_platform.registry import AXIOMS, TRANSACTIONS, StreamSpec
from sentinel_platform.resources.redis_publisher import PublishError, RedisPublisherResource
from sentinel_platform.resources.wire_columns import wire_frame
from sentinel_platform.schemas import CATEGORIES, STATUSES, Axiom, SchemaError, Transaction
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import axiom_keys, transaction_keys
from sentinel_platform.streams.producer.publish import (
    AXIOM_COLUMNS,
    EXACT_COLUMN,
    TRANSACTION_COLUMNS,
    PublishStats,
    axiom_fields,
    frame_entries,
    publish_rows,
    sample_checked,
    transaction_fields,
)
from workers.processors.axioms import AxiomProcessor
from workers.processors.transactions import TransactionProcessor

TXN = {
    "id": "txn-20261121-7-00000001",
    "merchant": "Kim's Convenience",
    "category": "grocery",
    "currency": "CAD",
    "amount": 12.5,
    "message": "Milk and bread, caf\u00e9 au lait",
    "is_threat": False,
    "source": "simulator",
    "timestamp": "2026-11-21T08:15:30.123Z",
}


def test_transaction_row_becomes_the_models_data_field() -> None:
    fields = transaction_fields({**TXN, "pre_score": 0.1, "amount_tier": "small"})
    assert fields == Transaction(**TXN).to_fields()
    assert Transaction.from_fields(fields).model_dump() == Transaction(**TXN).model_dump()


def test_transaction_without_threat_flag_omits_it_like_the_model() -> None:
    fields = transaction_fields({**TXN, "is_threat": None})
    assert '"is_threat"' not in fields["data"]
    assert fields == Transaction(**{**TXN, "is_threat": None}).to_fields()


def test_axiom_row_becomes_flat_string_fields() -> None:
    row = {
        "status": "critical",
        "metric_value": 187.0312,
        "anomaly_score": 0.9,
        "source_id": "aml-sensor-03",
        "emitted_at": "2026-11-21T08:15:00.000Z",
        "domain": "aml",
    }
    fields = axiom_fields({**row, "rolling_mean": 50.0})
    assert fields == Axiom(**row).to_fields()
    assert all(isinstance(v, str) for v in fields.values())
    assert Axiom.from_fields(fields) == Axiom(**row)


@pytest.mark.parametrize(
    ("field", "value"),
    [("amount", 12.345), ("currency", "XXX"), ("timestamp", "yesterday"), ("amount", -1.0)],
)
def test_row_that_consumers_would_reject_fails_on_the_producer(field: str, value: object) -> None:
    with pytest.raises(pydantic.ValidationError, match=field):
        transaction_fields({**TXN, field: value})


def test_partition_stats_combine_to_run_totals() -> None:
    a = PublishStats(rows=3, first_id="100-5", last_id="200-0", paused_s=1.0, soft_events=1)
    b = PublishStats(rows=2, first_id="99-9", last_id="200-1", hard_events=2, max_lag=7)
    total = PublishStats.combine([a, b])
    assert (total.rows, total.first_id, total.last_id) == (5, "99-9", "200-1")
    assert (total.soft_events, total.hard_events, total.paused_s, total.max_lag) == (1, 2, 1.0, 7)
    assert total.partitions == 2


# --- entries built by Spark ------------------------------------------------------------------
TXN_SCHEMA = (
    "id string, merchant string, category string, currency string, amount double, "
    "message string, is_threat boolean, source string, timestamp string"
)
AXIOM_SCHEMA = (
    "status string, metric_value double, anomaly_score double, source_id string, "
    "emitted_at string, domain string"
)
EDGE_TEXT = (
    "",
    "caf\u00e9 \u65e5\u672c \U0001f600",
    'quote " and backslash \\ and slash /',
    "line\nbreak\ttab\rreturn\bback\fform",
    "control \x01 \x0b \x1f and del \x7f",
    "literal \\u001F and \\u00e9 text",
    "separators \u2028 \u2029",
)
EDGE_AMOUNTS = (
    0.01,
    0.1,
    12.5,
    100.0,
    999.99,
    9_999_999.99,
    1e7,
    12_345_678.91,
    1e15,
    1e16,
    1.5e17,
)
EDGE_METRICS = (
    0.0,
    -0.0,
    1e-3,
    9.99e-4,
    1e-5,
    -187.0312,
    1e7,
    2e23,
    5e-324,
    1.7976931348623157e308,
)
EDGE_SCORES = (0.0, 1.0, 0.5, 1e-3, 9.99e-4, 1e-5, 0.1 + 0.2)


def _transaction_rows(count: int, seed: int) -> list[tuple[Any, ...]]:
    """Ordinary rows (first ``count``) then one row per edge amount and edge text."""
    rnd = random.Random(seed)
    rows = [
        (
            f"txn-{i:08d}",
            rnd.choice(("Costco Wholesale", "Kim's Convenience", "Pacific Forex")),
            rnd.choice(CATEGORIES),
            rnd.choice(("USD", "CAD", "EUR", "JPY")),
            round(10 ** rnd.uniform(-2, 6.8), 2) or 0.01,
            rnd.choice(("Weekly groceries", "FX settlement", "Milk and bread, caf\u00e9")),
            rnd.choice((True, False, None)),
            "simulator",
            f"2026-11-21T{rnd.randrange(24):02d}:{rnd.randrange(60):02d}:00.{i % 1000:03d}Z",
        )
        for i in range(count)
    ]
    edges = [(amount, "edge amount") for amount in EDGE_AMOUNTS]
    edges += [(12.5, text) for text in EDGE_TEXT]
    for n, (amount, text) in enumerate(edges):
        rows.append(
            (
                f"edge-{n}",
                text or "m",
                "other",
                "GBP",
                amount,
                text,
                None,
                text or "s",
                "2026-11-21T00:00:00+00:00",
            )
        )
    return rows


def _axiom_rows(count: int, seed: int) -> list[tuple[Any, ...]]:
    rnd = random.Random(seed)
    rows = [
        (
            rnd.choice(STATUSES),
            rnd.choice((1, -1)) * 10 ** rnd.uniform(-2.9, 6.9),
            rnd.uniform(1e-3, 1.0),
            f"sensor-{i:05d}",
            "2026-11-21T08:15:00.000Z",
            rnd.choice(("aml", "gdpr", None)),
        )
        for i in range(count)
    ]
    edges = [(m, 0.5) for m in EDGE_METRICS] + [(1.0, s) for s in EDGE_SCORES]
    for n, (metric, score) in enumerate(edges):
        rows.append(("nominal", metric, score, f"edge-{n}", "2026-11-21T00:00:00Z", "\u00fc"))
    return rows


def _as_dict(row: tuple[Any, ...], columns: tuple[str, ...]) -> dict[str, Any]:
    return dict(zip(columns, row, strict=True))


def _frame_entries(frame: Any, spec: StreamSpec) -> tuple[list[dict[str, str]], list[bool]]:
    names = spec.wire_fields
    collected = frame.collect()
    columns = [[r[name] for r in collected] for name in names]
    exact = [r[EXACT_COLUMN] for r in collected]
    return list(frame_entries(spec, columns, exact)), exact


@pytest.mark.spark
def test_spark_built_transaction_entries_are_the_models_bytes(spark: Any) -> None:
    rows = _transaction_rows(2_000, seed=11)
    frame = wire_frame(spark.createDataFrame(rows, TXN_SCHEMA), TRANSACTIONS)
    entries, exact = _frame_entries(frame, TRANSACTIONS)
    expected = [transaction_fields(_as_dict(r, TRANSACTION_COLUMNS)) for r in rows]
    assert entries == expected
    # The ordinary rows are built by the JVM alone, not by the fallback.
    assert all(exact[:2_000])
    assert exact[2_000 : 2_000 + len(EDGE_AMOUNTS)] == [a < 1e7 for a in EDGE_AMOUNTS]


@pytest.mark.spark
def test_spark_built_axiom_entries_are_the_models_bytes(spark: Any) -> None:
    rows = _axiom_rows(2_000, seed=12)
    frame = wire_frame(spark.createDataFrame(rows, AXIOM_SCHEMA), AXIOMS)
    entries, exact = _frame_entries(frame, AXIOMS)
    assert entries == [axiom_fields(_as_dict(r, AXIOM_COLUMNS)) for r in rows]
    assert all(exact[:2_000])
    assert not all(exact[2_000:])


@pytest.mark.spark
@pytest.mark.parametrize("kind", ["transactions", "axioms"])
def test_published_entries_are_the_models_bytes_and_parse_in_the_workers(
    spark: Any, data_settings: Settings, redis_client: RedisClient, kind: str
) -> None:
    keys = transaction_keys(data_settings) if kind == "transactions" else axiom_keys(data_settings)
    rows, schema, columns, to_fields = (
        (_transaction_rows(300, 21), TXN_SCHEMA, TRANSACTION_COLUMNS, transaction_fields)
        if kind == "transactions"
        else (_axiom_rows(300, 22), AXIOM_SCHEMA, AXIOM_COLUMNS, axiom_fields)
    )
    df = spark.createDataFrame(rows, schema).repartition(3)
    stats = RedisPublisherResource(**_no_consumers(data_settings)).publish_dataframe(df, kind)
    assert stats.rows == len(rows) and stats.partitions == 3
    published = [fields for _, fields in redis_client.xrange(keys.stream)]
    expected = [to_fields(_as_dict(r, columns)) for r in rows]
    assert sorted(published, key=_key) == sorted(expected, key=_key)
    processor: Any = (
        TransactionProcessor(data_settings)
        if kind == "transactions"
        else AxiomProcessor(data_settings)
    )
    parsed = sorted((processor.parse(f).model_dump() for f in published), key=str)
    models = [Transaction, Axiom][kind == "axioms"]
    assert parsed == sorted((models.from_fields(f).model_dump() for f in expected), key=str)


def _no_consumers(settings: Settings) -> dict[str, Any]:
    """Resource config for a publish no worker reads: limits the rows never reach."""
    return {"redis_url": settings.redis_url_value, "lag_warn": 10_000, "lag_pause": 20_000}


def _key(fields: dict[str, str]) -> str:
    return fields.get("data") or f"{fields['source_id']}|{fields['metric_value']}"


@pytest.mark.spark
@pytest.mark.parametrize(
    ("column", "value", "message"),
    [
        ("currency", "XXX", "Transaction.currency"),
        ("amount", 12.345, "Transaction.amount"),
        ("merchant", None, "Transaction.merchant"),
        ("category", "groceries", "Transaction.category"),
    ],
)
def test_invalid_row_past_the_sample_fails_the_publish_naming_the_field(
    spark: Any,
    data_settings: Settings,
    redis_client: RedisClient,
    column: str,
    value: object,
    message: str,
) -> None:
    keys = transaction_keys(data_settings)
    rows = _transaction_rows(500, seed=31)[:500]
    bad = list(rows[400])
    bad[TRANSACTION_COLUMNS.index(column)] = value
    rows[400] = tuple(bad)
    df = spark.createDataFrame(rows, TXN_SCHEMA).coalesce(1)
    publisher = RedisPublisherResource(**_no_consumers(data_settings), batch_size=100)
    with pytest.raises(PublishError, match=f"SchemaError: {message}"):
        publisher.publish_dataframe(df, "transactions")
    # The batches before the bad row were sent whole; nothing after it.
    assert redis_client.xlen(keys.stream) == 400


@pytest.mark.spark
def test_wire_column_of_the_wrong_type_fails_before_any_row_is_sent(
    spark: Any, data_settings: Settings, redis_client: RedisClient
) -> None:
    df = spark.createDataFrame(_transaction_rows(3, 41), TXN_SCHEMA).withColumn(
        "amount", F.col("amount").cast("string")
    )
    publisher = RedisPublisherResource(**_no_consumers(data_settings))
    with pytest.raises(SchemaError, match=r"Transaction\.amount: column is string"):
        publisher.publish_dataframe(df, "transactions")
    assert redis_client.xlen(transaction_keys(data_settings).stream) == 0


def test_rows_not_marked_exact_are_rewritten_by_the_model() -> None:
    jackson = (
        '{"id":"t","merchant":"m","category":"other","currency":"USD","amount":1.0E7,'
        '"message":"\\u001F","source":"s","timestamp":"2026-11-21T00:00:00Z"}'
    )
    (entry,) = frame_entries(TRANSACTIONS, [[jackson]], [False])
    assert entry["data"] == (
        '{"id":"t","merchant":"m","category":"other","currency":"USD","amount":10000000.0,'
        '"message":"\\u001f","source":"s","timestamp":"2026-11-21T00:00:00Z"}'
    )
    (axiom,) = frame_entries(
        AXIOMS,
        [["nominal"], ["1.0E-5"], ["0.5"], ["s"], ["2026-11-21T00:00:00Z"], [None]],
        [False],
    )
    assert axiom == {
        "status": "nominal",
        "metric_value": "1e-05",
        "anomaly_score": "0.5",
        "source_id": "s",
        "emitted_at": "2026-11-21T00:00:00Z",
    }


def test_sample_check_rejects_a_bad_entry_before_it_is_sent() -> None:
    entries = iter([{"data": "{}"}])
    with pytest.raises(SchemaError, match=r"Transaction\.id"):
        next(sample_checked(TRANSACTIONS, entries))


# --- the hand-encoded XADD path --------------------------------------------------------------
def test_hand_encoded_batches_store_exactly_the_fields_in_order(
    redis_client: RedisClient, settings: Settings
) -> None:
    keys = transaction_keys(settings)
    entries = [
        {"data": '{"m":"caf\u00e9 \U0001f600 \\r\\n"}'},
        {"status": "nominal", "metric_value": "1e-05", "domain": ""},
        {"a": "x" * 70_000},
    ] * 5
    stats = publish_rows(redis_client, keys, entries, batch_size=4, maxlen=1_000)
    stored = redis_client.xrange(keys.stream)
    assert [fields for _, fields in stored] == entries
    assert (stats.rows, stats.batches) == (15, 4)
    assert (stats.first_id, stats.last_id) == (stored[0][0], stored[-1][0])


def test_error_reply_fails_the_batch_and_leaves_the_client_usable(
    redis_client: RedisClient, settings: Settings
) -> None:
    keys = transaction_keys(settings)
    redis_client.set(keys.stream, "not a stream")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        publish_rows(redis_client, keys, [{"data": "1"}, {"data": "2"}], batch_size=10)
    redis_client.delete(keys.stream)
    assert publish_rows(redis_client, keys, [{"data": "3"}], batch_size=10).rows == 1
    assert redis_client.ping() and redis_client.xlen(keys.stream) == 1
