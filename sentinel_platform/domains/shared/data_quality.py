"""Blocking data-quality checks with great-expectations: the machinery the domains share.

Each data domain declares what is its own next to its assets, a :class:`QualitySuite`
(the columns it checks, its time column, its own expectations and helper columns); this
module runs it, and :func:`quality_check` builds the blocking daily check of every stream
from its spec and its suite (the shape is the same for every stream, and so is the tail
of every suite: an ISO-8601 time Spark can parse and no corrupt landing row).

A failed check stops the publish of its run (the publish assets sit downstream of the
checked assets, and the checks are ``blocking``), and its metadata lists each failed
expectation with the number of offending rows and a few sample values.

GX validates the Spark DataFrame itself (an ephemeral context with a Spark data source;
GX 1.24 works on Spark 4). The context and each kind's suite are built once per process.
The DataFrame is cached for the validation and unpersisted after it; the suite runs as
one validation asking only for verdicts, which GX computes in a handful of Spark jobs
(the unexpected counts of all expectations bundled in aggregations), and only failed
expectations are validated again for their counts and sample values: at 200,000 rows
10 Spark jobs instead of 36 (measured: ``bench/RESULTS.md``).

Two rules have no direct GX expectation, so the check first adds a helper column that
holds the offending *value* and is null otherwise, and expects it to be null; the samples
then show the bad values themselves:
``amount_over_2dp`` (amount with more than two decimals) and ``timestamp_unparseable``
(timestamps Spark cannot parse). ``_corrupt_record`` holds the raw text of landing rows
that did not fit the schema.
"""

import json
import os
import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sentinel_platform.domains.shared.landing import CORRUPT
from sentinel_platform.registry import StreamSpec
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


@dataclass
class _Prepared:
    """A kind's ephemeral GX context, batch definition and suite, built once per process."""

    batch_definition: Any
    suite: Any
    configs: tuple[str, ...]


_PREPARED: dict[str, _Prepared] = {}
# One GX context is not meant for concurrent validations; a process validates in turn.
_LOCK = threading.Lock()


def _configs(expectations: Sequence[Any]) -> tuple[str, ...]:
    return tuple(
        json.dumps(e.configuration.to_json_dict(), sort_keys=True, default=str)
        for e in expectations
    )


def _prepared(kind: str, expectations: Sequence[Any]) -> _Prepared:
    """The kind's context and suite: built at its first check in the process, rebuilt only
    if its expectations change."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    configs = _configs(expectations)
    prepared = _PREPARED.get(kind)
    if prepared is not None and prepared.configs == configs:
        return prepared
    context = gx.get_context(mode="ephemeral")
    # GX's tqdm bars would land in the Dagster step logs as carriage-return noise.
    context.variables.progress_bars = ProgressBarsConfig(globally=False, metric_calculations=False)
    # ``run_suite`` caches the DataFrame and unpersists it after; GX's own ``persist``
    # would keep it in executor memory for the life of the process.
    source = context.data_sources.add_spark(name=f"{kind}_spark", persist=False)
    batch_definition = source.add_dataframe_asset(name=kind).add_batch_definition_whole_dataframe(
        f"{kind}_whole"
    )
    suite = gx.ExpectationSuite(name=f"{kind}_quality")
    for expectation in expectations:
        suite.add_expectation(expectation)
    prepared = _PREPARED[kind] = _Prepared(batch_definition, suite, configs)
    return prepared


def validate(df: DataFrame, kind: str, expectations: Sequence[Any]) -> list[ExpectationOutcome]:
    """Run ``expectations`` as the ``kind`` suite on ``df`` with GX; one outcome each.

    The whole suite runs as one validation asking only for the verdicts (``BOOLEAN_ONLY``):
    GX then bundles the expectations' unexpected counts into a few aggregations over the
    DataFrame, instead of a collect of sample values per expectation. Only when some fail
    does a second validation of just those fetch their counts and samples. Outcomes keep
    the suite's order.
    """
    import great_expectations as gx

    with _LOCK:
        prepared = _prepared(kind, expectations)
        batch = prepared.batch_definition.get_batch(batch_parameters={"dataframe": df})
        verdicts = batch.validate(prepared.suite, result_format="BOOLEAN_ONLY")
        failed = [item for item in verdicts.results if not item.success]
        details: dict[str, Any] = {}
        if failed:
            suite = gx.ExpectationSuite(name=f"{kind}_failures")
            for item in failed:
                expectation = item.expectation_config.to_domain_obj()
                expectation.id = None  # a copy, for a suite of its own
                suite.add_expectation(expectation)
            explained = batch.validate(
                suite,
                result_format={"result_format": "BASIC", "partial_unexpected_count": SAMPLE_SIZE},
            )
            details = {_key(item.expectation_config): item for item in explained.results}
    return [_outcome(details.get(_key(item.expectation_config), item)) for item in verdicts.results]


def _key(config: Any) -> str:
    return json.dumps([config.type, config.kwargs], sort_keys=True, default=str)


def _outcome(item: Any) -> ExpectationOutcome:
    details = item.result or {}
    error = (item.exception_info or {}).get("exception_message")
    config = item.expectation_config
    return ExpectationOutcome(
        expectation=config.type if config else "?",
        column=_column_of(config) if config else "",
        success=bool(item.success),
        unexpected_count=int(details.get("unexpected_count") or 0),
        unexpected_percent=round(float(details.get("unexpected_percent") or 0.0), 3),
        sample=list(details.get("partial_unexpected_list") or [])[:SAMPLE_SIZE],
        error=error,
    )


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


@dataclass(frozen=True)
class QualitySuite:
    """What a stream's blocking check looks at that is the stream's own.

    ``columns`` are the checked columns, in order; ``time_column`` holds each row's time;
    ``helpers`` build the stream's helper columns (the offending value, else null);
    ``rules`` are the stream's own expectations, given ``great_expectations.expectations``
    (called when the check runs, so GX is imported only then). Every suite then expects the
    time to match :data:`ISO_8601` and to parse, and no row in ``_corrupt_record``.
    """

    columns: tuple[str, ...]
    time_column: str
    rules: Callable[[Any], list[Any]]
    helpers: tuple[Callable[[], Column], ...] = ()

    def view(self, df: DataFrame) -> DataFrame:
        """The columns GX checks, with the helper columns holding the offending values."""
        helpers = [helper() for helper in self.helpers]
        return df.select(*self.columns, CORRUPT, *helpers, timestamp_unparseable(self.time_column))

    def expectations(self) -> list[Any]:
        """The stream's own expectations, then the time and corrupt-row ones all share."""
        import great_expectations as gx

        e = gx.expectations
        return [
            *self.rules(e),
            e.ExpectColumnValuesToMatchRegex(column=self.time_column, regex=ISO_8601),
            e.ExpectColumnValuesToBeNull(column="timestamp_unparseable"),
            e.ExpectColumnValuesToBeNull(column=CORRUPT),
        ]


def quality_check(
    spec: StreamSpec,
    asset: dg.AssetsDefinition,
    suite: QualitySuite,
    description: str,
) -> dg.AssetChecksDefinition:
    """The blocking, daily-partitioned check ``<stream name>_quality`` of ``asset``:
    :func:`run_suite` of ``suite`` on the partition, the suite named after the stream."""
    from sentinel_platform.domains.shared.common import DAILY

    with warnings.catch_warnings():
        # ``partitions_def`` on an asset check is a Dagster preview; daily checks need it.
        warnings.simplefilter("ignore", category=dg.PreviewWarning)

        @dg.asset_check(
            asset=asset,
            name=f"{spec.name}_quality",
            blocking=True,
            partitions_def=DAILY,
            description=description,
        )
        def check(data: DataFrame) -> dg.AssetCheckResult:
            return run_suite(data, spec.name, suite.view, suite.expectations())

    return check
