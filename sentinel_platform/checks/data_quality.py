"""Blocking data-quality checks with great-expectations on the Spark DataFrames to publish.

A failed check stops the publish of its run (the publish assets sit downstream of the
checked assets, and the checks are ``blocking``), and its metadata lists each failed
expectation with the number of offending rows and a few sample values.

GX validates the Spark DataFrame itself (an ephemeral context with a Spark data source;
GX 1.24 works on Spark 4). Two rules have no direct GX expectation, so the check first
adds a helper column that holds the offending *value* and is null otherwise, and expects
it to be null; the samples then show the bad values themselves:
``amount_over_2dp`` (amount with more than two decimals) and ``timestamp_unparseable``
(timestamps Spark cannot parse). ``_corrupt_record`` holds the raw text of landing rows
that did not fit the schema.
"""

import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sentinel_platform.assets.axioms import axioms
from sentinel_platform.assets.common import DAILY
from sentinel_platform.assets.landing import CORRUPT
from sentinel_platform.assets.transactions import enriched_transactions
from sentinel_platform.resources.spark import session_metadata
from sentinel_platform.schemas import CATEGORIES, CURRENCIES, STATUSES

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")

SAMPLE_SIZE = 5
ISO_8601 = r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,9})?(Z|[+-]\d{2}:\d{2})?$"


@dataclass(frozen=True)
class ExpectationOutcome:
    """One expectation's verdict, flattened for Dagster metadata."""

    expectation: str
    column: str
    success: bool
    unexpected_count: int
    unexpected_percent: float
    sample: list[Any]
    error: str | None = None


def _expectations(kind: str) -> list[Any]:
    import great_expectations as gx

    e = gx.expectations
    if kind == "transactions":
        return [
            e.ExpectColumnValuesToNotBeNull(column="id"),
            e.ExpectColumnValuesToBeUnique(column="id"),
            e.ExpectColumnValuesToNotBeNull(column="amount"),
            e.ExpectColumnValuesToBeBetween(column="amount", min_value=0, strict_min=True),
            e.ExpectColumnValuesToBeNull(column="amount_over_2dp"),
            e.ExpectColumnValuesToNotBeNull(column="currency"),
            e.ExpectColumnValuesToBeInSet(column="currency", value_set=sorted(CURRENCIES)),
            e.ExpectColumnValuesToNotBeNull(column="category"),
            e.ExpectColumnValuesToBeInSet(column="category", value_set=list(CATEGORIES)),
            e.ExpectColumnValuesToNotBeNull(column="timestamp"),
            e.ExpectColumnValuesToMatchRegex(column="timestamp", regex=ISO_8601),
            e.ExpectColumnValuesToBeNull(column="timestamp_unparseable"),
            e.ExpectColumnValuesToBeNull(column=CORRUPT),
        ]
    return [
        e.ExpectColumnValuesToNotBeNull(column="source_id"),
        e.ExpectCompoundColumnsToBeUnique(column_list=["source_id", "emitted_at"]),
        e.ExpectColumnValuesToNotBeNull(column="metric_value"),
        e.ExpectColumnValuesToNotBeNull(column="anomaly_score"),
        e.ExpectColumnValuesToBeBetween(column="anomaly_score", min_value=0, max_value=1),
        e.ExpectColumnValuesToBeInSet(column="status", value_set=list(STATUSES)),
        e.ExpectColumnValuesToMatchRegex(column="emitted_at", regex=ISO_8601),
        e.ExpectColumnValuesToBeNull(column="timestamp_unparseable"),
        e.ExpectColumnValuesToBeNull(column=CORRUPT),
    ]


def transaction_view(df: DataFrame) -> DataFrame:
    """The columns GX checks, with the helper columns described in the module docstring."""
    return df.select(
        "id",
        "amount",
        "currency",
        "category",
        "timestamp",
        CORRUPT,
        F.when(F.round("amount", 2) != F.col("amount"), F.col("amount")).alias("amount_over_2dp"),
        F.when(
            F.col("timestamp").isNotNull() & F.try_to_timestamp(F.col("timestamp")).isNull(),
            F.col("timestamp"),
        ).alias("timestamp_unparseable"),
    )


def axiom_view(df: DataFrame) -> DataFrame:
    return df.select(
        "source_id",
        "emitted_at",
        "metric_value",
        "anomaly_score",
        "status",
        CORRUPT,
        F.when(
            F.col("emitted_at").isNotNull() & F.try_to_timestamp(F.col("emitted_at")).isNull(),
            F.col("emitted_at"),
        ).alias("timestamp_unparseable"),
    )


def _column_of(config: Any) -> str:
    kwargs = config.kwargs
    return kwargs.get("column") or ",".join(kwargs.get("column_list") or [])


def validate(df: DataFrame, kind: str) -> list[ExpectationOutcome]:
    """Run the ``kind`` suite on ``df`` with GX; one outcome per expectation."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    # GX's tqdm bars would land in the Dagster step logs as carriage-return noise.
    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    source = context.data_sources.add_spark(name=f"{kind}_spark")
    batch_definition = source.add_dataframe_asset(name=kind).add_batch_definition_whole_dataframe(
        f"{kind}_whole"
    )
    suite = gx.ExpectationSuite(name=f"{kind}_quality")
    for expectation in _expectations(kind):
        suite.add_expectation(expectation)
    batch = batch_definition.get_batch(batch_parameters={"dataframe": df})
    result = batch.validate(
        suite, result_format={"result_format": "BASIC", "partial_unexpected_count": SAMPLE_SIZE}
    )
    outcomes = []
    for item in result.results:
        details = item.result or {}
        error = (item.exception_info or {}).get("exception_message")
        outcomes.append(
            ExpectationOutcome(
                expectation=item.expectation_config.type,
                column=_column_of(item.expectation_config),
                success=bool(item.success),
                unexpected_count=int(details.get("unexpected_count") or 0),
                unexpected_percent=round(float(details.get("unexpected_percent") or 0.0), 3),
                sample=list(details.get("partial_unexpected_list") or [])[:SAMPLE_SIZE],
                error=error,
            )
        )
    return outcomes


def check_result(outcomes: Sequence[ExpectationOutcome], rows: int) -> dg.AssetCheckResult:
    """A blocking verdict with the failed expectations as a table and as markdown."""
    failed = [o for o in outcomes if not o.success]
    records = [
        dg.TableRecord(
            {
                "expectation": o.expectation,
                "column": o.column,
                "unexpected_count": o.unexpected_count,
                "unexpected_percent": o.unexpected_percent,
                "sample": ", ".join(repr(v) for v in o.sample) or (o.error or ""),
            }
        )
        for o in failed
    ]
    schema = dg.TableSchema(
        columns=[
            dg.TableColumn("expectation", "string"),
            dg.TableColumn("column", "string"),
            dg.TableColumn("unexpected_count", "int"),
            dg.TableColumn("unexpected_percent", "float"),
            dg.TableColumn("sample", "string"),
        ]
    )
    lines = [
        f"- **{o.expectation}** on `{o.column}`: {o.unexpected_count} rows "
        f"({o.unexpected_percent}%), e.g. {', '.join(repr(v) for v in o.sample) or o.error}"
        for o in failed
    ]
    return dg.AssetCheckResult(
        passed=not failed,
        severity=dg.AssetCheckSeverity.ERROR,
        metadata={
            "rows": dg.MetadataValue.int(rows),
            "expectations": dg.MetadataValue.int(len(outcomes)),
            "failed_expectations": dg.MetadataValue.int(len(failed)),
            "failures": dg.MetadataValue.table(records, schema=schema),
            "summary": dg.MetadataValue.md("\n".join(lines) or "all expectations met"),
        },
    )


def _run(df: DataFrame, kind: str, view: Callable[[DataFrame], DataFrame]) -> dg.AssetCheckResult:
    checked = view(df).cache()
    try:
        rows = checked.count()
        result = check_result(validate(checked, kind), rows)
    finally:
        checked.unpersist()
    # The DataFrame comes from the IO manager's configured session; show which one ran it.
    return result._replace(metadata={**result.metadata, **session_metadata(df.sparkSession)})


with warnings.catch_warnings():
    # ``partitions_def`` on an asset check is a Dagster preview; daily checks need it.
    warnings.simplefilter("ignore", category=dg.PreviewWarning)

    @dg.asset_check(asset=enriched_transactions, blocking=True, partitions_def=DAILY)
    def transactions_quality(enriched_transactions: DataFrame) -> dg.AssetCheckResult:
        """Unique non-null ids, positive 2-dp amounts, known currencies/categories, ISO times."""
        return _run(enriched_transactions, "transactions", transaction_view)

    @dg.asset_check(asset=axioms, blocking=True, partitions_def=DAILY)
    def axioms_quality(axioms: DataFrame) -> dg.AssetCheckResult:
        """Non-null unique (source_id, emitted_at), scores in [0,1], known statuses, ISO times."""
        return _run(axioms, "axioms", axiom_view)
