"""Stream entries built as Spark columns, so the executors' Python only pipelines strings.

:func:`wire_frame` turns a DataFrame of wire columns into the exact field strings the
workers parse: the transaction ``data`` JSON through ``to_json(struct(...))`` and the
axioms' flat strings through casts, all evaluated in the JVM. The bytes equal those of
the wire models (:meth:`Transaction.to_fields`, :meth:`Axiom.to_fields`) wherever the JVM
and Python print values alike; for every other row the frame's
:data:`~sentinel_platform.streams.producer.publish.EXACT_COLUMN` is false and the executor
re-serialises that row through the wire model, which also rejects it if it is invalid.

The JVM and Python print a double alike in fixed notation only: Java's
``Double.toString`` switches to ``1.0E7`` style outside ``[1e-3, 1e7)`` and, before
JDK 19, does not always print the shortest digits there. Jackson (``to_json``) escapes
control characters as upper-case ``\\u001F`` where the wire models write ``\\u001f``.
Rows that are missing a required value, or break a rule that costs nothing to test in
the JVM (category, currency, status, amount sign and cents, score range, lengths), are
also routed to the wire model so that they fail on the producer with a
:class:`~sentinel_platform.schemas.SchemaError` naming the field, not on the consumer.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, DataType, NumericType, StringType

from sentinel_platform.registry import AXIOMS, TRANSACTIONS, StreamSpec
from sentinel_platform.schemas import CATEGORIES, CURRENCIES, STATUSES, SchemaError
from sentinel_platform.streams.producer.publish import EXACT_COLUMN
from sentinel_platform.streams.producer.routed_publish import SHARD_COLUMN
from sentinel_platform.streams.sharding.routing import shard_column

#: Where Java's ``Double.toString``, Python's ``repr`` and pydantic's JSON all print the
#: same fixed-notation digits.
FIXED_LOW = 1e-3
FIXED_HIGH = 1e7
MAX_TEXT = 1024
MAX_MESSAGE = 4096


Types = dict[str, tuple[type[DataType], ...]]
TRANSACTION_TYPES: Types = {
    **{c: (StringType,) for c in TRANSACTIONS.columns},
    "amount": (NumericType,),
    "is_threat": (BooleanType,),
}
AXIOM_TYPES: Types = {
    **{c: (StringType,) for c in AXIOMS.columns},
    "metric_value": (NumericType,),
    "anomaly_score": (NumericType,),
}


def check_schema(df: DataFrame, spec: StreamSpec, types: Types | None = None) -> None:
    """Raise :class:`SchemaError` naming the first wire column missing or of the wrong type.

    Without ``types`` only the presence of ``spec.columns`` is checked: the wire model
    judges the values on the executors.
    """
    model = spec.wire_model.__name__
    fields = {f.name: f.dataType for f in df.schema.fields}
    for name in spec.columns:
        if name not in fields:
            raise SchemaError(model, name, "column is missing from the DataFrame")
    for name, allowed in (types or {}).items():
        if not isinstance(fields[name], allowed):
            wanted = " or ".join(t.__name__.removesuffix("Type").lower() for t in allowed)
            raise SchemaError(
                model, name, f"column is {fields[name].simpleString()}, expected {wanted}"
            )


def fixed_notation(value: Column) -> Column:
    """True where the JVM prints ``value`` with the same characters as Python (never null)."""
    magnitude = F.abs(value)
    alike = (value == 0) | ((magnitude >= F.lit(FIXED_LOW)) & (magnitude < F.lit(FIXED_HIGH)))
    return F.coalesce(alike, F.lit(False))


def _all(conditions: list[Column]) -> Column:
    combined = conditions[0]
    for condition in conditions[1:]:
        combined = combined & condition
    return F.coalesce(combined, F.lit(False))


def _text_ok(name: str, max_chars: int = MAX_TEXT, min_chars: int = 1) -> Column:
    return F.col(name).isNotNull() & F.length(name).between(min_chars, max_chars)


def transaction_frame(df: DataFrame) -> DataFrame:
    """``(data, wire_exact)``: the ``{"data": json}`` entry of each transaction row."""
    check_schema(df, TRANSACTIONS, TRANSACTION_TYPES)
    amount = F.col("amount").cast("double")
    values = [amount.alias(c) if c == "amount" else F.col(c) for c in TRANSACTIONS.columns]
    data = F.to_json(F.struct(*values), {"ignoreNullFields": "true"})
    exact = _all(
        [
            *(_text_ok(c) for c in ("id", "merchant", "source")),
            F.col("category").isin(*CATEGORIES),
            F.col("currency").isin(*sorted(CURRENCIES)),
            amount > 0,
            F.round(amount, 2) == amount,
            fixed_notation(amount),
            _text_ok("message", MAX_MESSAGE, 0),
            F.col("timestamp").isNotNull(),
        ]
    )
    # Jackson's upper-case \u00XX escapes differ from the model's lower-case ones.
    escaped = data.contains("\\u00")
    return df.select(data.alias("data"), (exact & ~escaped).alias(EXACT_COLUMN))


def axiom_frame(df: DataFrame) -> DataFrame:
    """The axioms' flat string fields plus ``wire_exact``, in ``AXIOMS.columns`` order."""
    check_schema(df, AXIOMS, AXIOM_TYPES)
    metric = F.col("metric_value").cast("double")
    score = F.col("anomaly_score").cast("double")
    exact = _all(
        [
            F.col("status").isin(*STATUSES),
            fixed_notation(metric),
            fixed_notation(score),
            score.between(0.0, 1.0),
            _text_ok("source_id"),
            F.col("emitted_at").isNotNull(),
            F.col("domain").isNull() | _text_ok("domain"),
        ]
    )
    return df.select(
        "status",
        metric.cast("string").alias("metric_value"),
        score.cast("string").alias("anomaly_score"),
        "source_id",
        "emitted_at",
        "domain",
        exact.alias(EXACT_COLUMN),
    )


def generic_frame(df: DataFrame, spec: StreamSpec) -> DataFrame:
    """The wire fields of a stream with no JVM fast path: every row marked inexact.

    The executors then send each row through ``spec``'s wire model, which writes the
    exact bytes or rejects the row naming the field; correct for any stream, at the cost
    of one model per row.
    """
    check_schema(df, spec)
    if spec.payload_field:
        data = F.to_json(F.struct(*(F.col(c) for c in spec.columns)))
        fields = [data.alias(spec.payload_field)]
    else:
        fields = [F.col(c).cast("string").alias(c) for c in spec.columns]
    return df.select(*fields, F.lit(False).alias(EXACT_COLUMN))


def transaction_key(frame: DataFrame) -> Column:
    """A transaction's natural key (its ``id``) read back from its ``data`` JSON, as the
    wire model reads it: exact for the rows marked exact (plain text ids)."""
    return F.get_json_object(F.col("data"), "$.id")


def axiom_key(frame: DataFrame) -> Column:
    """An axiom's natural key, ``source_id|emitted_at``, from its wire strings (the model
    keeps ``emitted_at`` as written)."""
    return F.concat(F.col("source_id"), F.lit("|"), F.col("emitted_at"))


def _imported(path: str | None) -> Callable[[DataFrame], Any] | None:
    if path is None:
        return None
    module, _, name = path.partition(":")
    builder: Callable[[DataFrame], Any] = getattr(importlib.import_module(module), name)
    return builder


def with_shard(frame: DataFrame, spec: StreamSpec) -> DataFrame:
    """``frame`` plus :data:`SHARD_COLUMN`: for each exact row the shard of its natural key
    (the spec's ``spark_key``, CRC-32 in the JVM, ``sharding.routing.shard_column``); null
    for the rest, which the executor routes by its wire model's own key."""
    key = _imported(spec.spark_key)
    shard = (
        F.when(F.col(EXACT_COLUMN), shard_column(key(frame), spec.shards))
        if key is not None
        else F.lit(None)
    )
    return frame.withColumn(SHARD_COLUMN, shard.cast("int"))


def wire_frame(df: DataFrame, spec: StreamSpec) -> DataFrame:
    """The columns ``partition_publisher.PartitionPublisher`` sends.

    The spec's JVM builder (``spark_frame``) when it has one, else :func:`generic_frame`;
    for a sharded stream with each row's shard (:func:`with_shard`).
    """
    fast = _imported(spec.spark_frame)
    frame = fast(df) if fast is not None else generic_frame(df, spec)
    return with_shard(frame, spec) if spec.shards > 1 else frame
