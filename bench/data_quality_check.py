"""Where the blocking data-quality check's time goes, phase by phase, on a real partition.

Usage: ``python bench/data_quality_check.py [--rows N] [--rounds N] [--phases]``

A local SparkSession (``local[2]``, the settings' Spark defaults) generates and enriches
one day's transactions exactly as the assets do (``--rows``, 200,000 by default), writes
them to Parquet and reads them back, as the check receives them from the IO manager.
It then times:

* the check's body (``run_suite`` on that DataFrame, as ``transactions_quality`` calls
  it) with two validations interleaved in the same process: ``previous`` (the code
  before the check was trimmed, kept for the comparison: a new GX context and suite per
  call, every expectation asked for its counts and sample values) and ``current``
  (``data_quality.validate``): one warm-up call each (the first pays the GX import and
  Spark's first plans), then ``--rounds`` timed calls each; wall seconds, the Spark
  JVM's CPU seconds (``/proc``, robust to a busy machine) and Spark jobs per call;
* with ``--phases``, GX's own phases on the same view, done by hand: importing GX, the
  ephemeral context, the Spark data source and batch definition, the suite, the batch,
  the validation of the whole suite and of each expectation alone (seconds and Spark
  jobs each).

Spark jobs are counted through a job group. No Redis, no Dagster run: this measures the
check alone. Ends with one JSON line.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import date
from pathlib import Path
from typing import Any, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
os.environ["GX_ANALYTICS_ENABLED"] = "false"

from bench._common import emit_json, exit_on_signals, machine_info

DAY = date(2026, 11, 20)
T = TypeVar("T")


def spark_session() -> Any:
    from pyspark.sql import SparkSession

    from sentinel_platform.resources.spark import DEFAULT_CONF

    builder = SparkSession.builder.master(os.environ.get("BENCH_SPARK_MASTER", "local[2]"))
    for key, value in DEFAULT_CONF.items():
        builder = builder.config(key, value)
    spark = builder.appName("data-quality-bench").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def partition(spark: Any, rows: int, directory: Path) -> Any:
    """One day's enriched transactions as the IO manager hands them to the check."""
    from pyspark.sql import functions as F

    from sentinel_platform.domains.shared.generation import generate_transactions
    from sentinel_platform.domains.shared.landing import CORRUPT
    from sentinel_platform.domains.transactions.assets import enrich_transactions

    raw = generate_transactions(spark, DAY, rows, 7, 4).withColumn(
        CORRUPT, F.lit(None).cast("string")
    )
    path = str(directory / "enriched_transactions")
    enrich_transactions(raw, 1000.0).write.mode("overwrite").parquet(path)
    return spark.read.parquet(path)


class Jobs:
    """Counts the Spark jobs started under one job group."""

    def __init__(self, spark: Any) -> None:
        self.context = spark.sparkContext
        self.groups = 0

    @contextmanager
    def group(self) -> Iterator[list[int]]:
        self.groups += 1
        name = f"dq-bench-{self.groups}"
        self.context.setJobGroup(name, name)
        found: list[int] = []
        try:
            yield found
        finally:
            found.extend(self.context.statusTracker().getJobIdsForGroup(name))
            self.context.setLocalProperty("spark.jobGroup.id", None)


def timed(action: Callable[[], T]) -> tuple[T, float]:
    started = time.perf_counter()
    value = action()
    return value, round(time.perf_counter() - started, 3)


def previous_validate(df: Any, kind: str, expectations: Any) -> list[Any]:
    """The check's validation before it was trimmed, for the comparison: a new
    context and suite per call, every expectation's counts and samples asked for."""
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    from sentinel_platform.domains.shared import data_quality

    context = gx.get_context(mode="ephemeral")
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
        suite,
        result_format={
            "result_format": "BASIC",
            "partial_unexpected_count": data_quality.SAMPLE_SIZE,
        },
    )
    return [data_quality._outcome(item) for item in result.results]


def jvm_cpu_s(spark: Any) -> float:
    """CPU seconds (user + system) the local Spark JVM has used so far."""
    pid = int(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def check_calls(spark: Any, df: Any, rounds: int, jobs: Jobs) -> dict[str, list[dict[str, Any]]]:
    """The check's body as Dagster calls it, ``previous`` and ``current`` validation
    interleaved: one warm-up call each (GX import, first Spark plans), then ``rounds``."""
    from sentinel_platform.domains.shared import data_quality
    from sentinel_platform.domains.transactions.checks import (
        transaction_expectations,
        transaction_view,
    )

    current = data_quality.validate
    paths = {"previous": previous_validate, "current": current}
    calls: dict[str, list[dict[str, Any]]] = {name: [] for name in paths}
    for index in range(1 + rounds):
        for name, validate in paths.items():
            data_quality.validate = validate  # run_suite looks it up at each call
            try:
                cpu = jvm_cpu_s(spark)
                with jobs.group() as ids:
                    result, seconds = timed(
                        lambda: data_quality.run_suite(
                            df, "transactions", transaction_view, transaction_expectations()
                        )
                    )
                cpu = round(jvm_cpu_s(spark) - cpu, 2)
            finally:
                data_quality.validate = current
            call = {
                "call": "warm-up" if index == 0 else index,
                "seconds": seconds,
                "jvm_cpu_s": cpu,
                "spark_jobs": len(ids),
                "passed": result.passed,
            }
            calls[name].append(call)
            print(
                f"{name:<9} call {call['call']}: {seconds:.2f}s, JVM CPU {cpu:.2f}s, "
                f"{len(ids)} Spark jobs, passed {result.passed}",
                flush=True,
            )
    return calls


def phases(df: Any, jobs: Jobs) -> dict[str, Any]:
    """GX's phases by hand on the check's view (cached, as the check caches it)."""
    from sentinel_platform.domains.shared import data_quality
    from sentinel_platform.domains.transactions.checks import (
        transaction_expectations,
        transaction_view,
    )

    out: dict[str, Any] = {}
    gx, out["import_gx_s"] = timed(lambda: __import__("great_expectations"))
    from great_expectations.data_context.types.base import ProgressBarsConfig

    def make_context() -> Any:
        context = gx.get_context(mode="ephemeral")
        context.variables.progress_bars = ProgressBarsConfig(
            globally=False, metric_calculations=False
        )
        return context

    context, out["context_s"] = timed(make_context)
    batch_definition, out["data_source_s"] = timed(
        lambda: (
            context.data_sources.add_spark(name="t_spark")
            .add_dataframe_asset(name="t")
            .add_batch_definition_whole_dataframe("t_whole")
        )
    )

    def make_suite(items: list[Any], name: str) -> Any:
        suite = gx.ExpectationSuite(name=name)
        for expectation in items:
            suite.add_expectation(expectation)
        return suite

    suite, out["suite_s"] = timed(lambda: make_suite(transaction_expectations(), "all"))
    checked = transaction_view(df).cache()
    (rows, out["view_cache_count_s"]) = timed(checked.count)
    out["rows"] = rows
    batch, out["batch_s"] = timed(
        lambda: batch_definition.get_batch(batch_parameters={"dataframe": checked})
    )
    result_format = {"result_format": "BASIC", "partial_unexpected_count": 5}
    with jobs.group() as ids:
        result, out["validate_all_s"] = timed(
            lambda: batch.validate(suite, result_format=result_format)
        )
    out["validate_all_jobs"] = len(ids)
    each = []
    for index, expectation in enumerate(transaction_expectations()):
        one = make_suite([expectation], f"one-{index}")

        def run_one(one: Any = one) -> Any:
            return batch.validate(one, result_format=result_format)

        with jobs.group() as ids:
            _, seconds = timed(run_one)
        column = expectation.column if hasattr(expectation, "column") else ""
        each.append(
            {
                "expectation": f"{expectation.expectation_type}({column})",
                "seconds": seconds,
                "spark_jobs": len(ids),
            }
        )
    out["each"] = each
    converted = getattr(data_quality, "outcomes_of", None)
    if converted is not None:
        _, out["convert_s"] = timed(lambda: converted(result))
    checked.unpersist()
    return out


def main(argv: list[str] | None = None) -> int:
    exit_on_signals()
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rows", type=int, default=200_000)
    parser.add_argument("--rounds", type=int, default=3, help="timed calls of each path")
    parser.add_argument("--phases", action="store_true", help="also time GX's phases by hand")
    args = parser.parse_args(argv)

    spark = spark_session()
    jobs = Jobs(spark)
    try:
        with tempfile.TemporaryDirectory(prefix="dq-bench-") as tmp:
            df, build_s = timed(lambda: partition(spark, args.rows, Path(tmp)))
            print(f"partition: {args.rows:,} rows generated, enriched, written in {build_s:.2f}s")
            calls = check_calls(spark, df, args.rounds, jobs)
            detail = phases(df, jobs) if args.phases else {}
    finally:
        spark.stop()
    if detail:
        for name, value in detail.items():
            if name != "each":
                print(f"  {name:<22} {value}")
        for item in detail["each"]:
            print(
                f"  {item['expectation']:<60} {item['seconds']:>7.3f}s  {item['spark_jobs']} jobs"
            )
    summary = {
        name: {
            "warm_up_s": items[0]["seconds"],
            "median_s": statistics.median(c["seconds"] for c in items[1:]),
            "median_jvm_cpu_s": statistics.median(c["jvm_cpu_s"] for c in items[1:]),
            "spark_jobs": items[-1]["spark_jobs"],
        }
        for name, items in calls.items()
    }
    print(f"{'path':<9} {'warm-up s':>10} {'median s':>9} {'JVM CPU s':>10} {'Spark jobs':>11}")
    for name, item in summary.items():
        print(
            f"{name:<9} {item['warm_up_s']:>10.2f} {item['median_s']:>9.2f} "
            f"{item['median_jvm_cpu_s']:>10.2f} {item['spark_jobs']:>11}"
        )
    emit_json(
        "data_quality_check",
        {
            "rows": args.rows,
            "summary": summary,
            "build_s": build_s,
            "calls": calls,
            "phases": detail,
            "machine": machine_info(),
        },
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
