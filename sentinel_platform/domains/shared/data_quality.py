"""Blocking data-quality checks with great-expectations: the machinery the domains share.

Each data domain defines its view and expectations next to its assets; this module runs
them.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sentinel_platform.resources.spark import session_metadata

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


def _column_of(config: Any) -> str:
    kwargs = config.kwargs
    return kwargs.get("column") or ",".join(kwargs.get("column_list") or [])


def validate(df: DataFrame, kind: str, expectations: Sequence[Any]) -> list[ExpectationOutcome]:
    """Run ``expectations`` as the ``kind`` suite on ``df`` with GX; one outcome each."""
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
    for expectation in expectations:
        suite.add_expectation(expectation)
    batch = batch_definition.get_batch(batch_parameters={"dataframe": df})
    result = batch.validate(
        suite, result_format={"result_format": "BASIC", "partial_unexpected_count": SAMPLE_SIZE}
    )
    outcomes = []
    for item in result.results:
        details = item.result or {}
        error = (item.exception_info or {}).get("exception_message")
        config = item.expectation_config
        outcomes.append(
            ExpectationOutcome(
                expectation=config.type if config else "?",
                column=_column_of(config) if config else "",
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


def run_suite(
    df: DataFrame,
    kind: str,
    view: Callable[[DataFrame], DataFrame],
    expectations: Sequence[Any],
) -> dg.AssetCheckResult:
    """The blocking check result of ``expectations`` on ``view(df)``, with the session used."""
    checked = view(df).cache()
    try:
        rows = checked.count()
        result = check_result(validate(checked, kind, expectations), rows)
    finally:
        checked.unpersist()
    # The DataFrame comes from the IO manager's configured session; show which one ran it.
    return result._replace(metadata={**result.metadata, **session_metadata(df.sparkSession)})


def timestamp_unparseable(column: str) -> Column:
    """The column's value where Spark cannot parse it as a timestamp, else null."""
    return F.when(
        F.col(column).isNotNull() & F.try_to_timestamp(F.col(column)).isNull(), F.col(column)
    ).alias("timestamp_unparseable")
