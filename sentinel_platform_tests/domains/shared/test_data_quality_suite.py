"""The blocking check keeps its verdicts while GX's context and suite live for the process.

The suite runs once for the verdicts and, only when some fail, once more for their counts
and samples; the context and suite are built at a kind's first check and reused. These
tests run the transactions check's body on real Spark DataFrames, a good partition then a
bad one in the same process (a reused context must not answer from the previous
partition), and read the failed expectations from the check's own result.
"""

from __future__ import annotations

from typing import Any

import pytest

from sentinel_platform.domains.axioms.checks import AXIOM_SUITE
from sentinel_platform.domains.shared.data_quality import QualitySuite, run_suite, validate
from sentinel_platform.domains.shared.landing import CORRUPT
from sentinel_platform.domains.transactions.checks import TRANSACTION_SUITE

pytestmark = pytest.mark.spark

SCHEMA = (
    "id string, amount double, currency string, category string, timestamp string, "
    f"{CORRUPT} string"
)
GOOD = [
    ("t-1", 10.5, "USD", "retail", "2026-11-20T10:00:00Z", None),
    ("t-2", 3.25, "CAD", "grocery", "2026-11-20T10:01:00Z", None),
]
BAD = [
    *GOOD,
    ("t-2", 7.0, "USD", "retail", "2026-11-20T10:02:00Z", None),  # duplicate id
    ("t-4", 3.999, "XXX", "retail", "2026-11-20T10:03:00Z", None),  # 3 dp, unknown currency
]


def _check(spark: Any, rows: list[tuple[Any, ...]]) -> Any:
    df = spark.createDataFrame(rows, SCHEMA)
    return run_suite(df, "transactions", TRANSACTION_SUITE.view, TRANSACTION_SUITE.expectations())


def _failures(result: Any) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (r.data["expectation"], r.data["column"]): r.data
        for r in result.metadata["failures"].value.records
    }


def test_bad_partition_after_a_good_one_fails_naming_each_expectation(spark: Any) -> None:
    good = _check(spark, GOOD)
    assert good.passed and good.metadata["failed_expectations"].value == 0

    bad = _check(spark, BAD)
    assert not bad.passed
    assert bad.severity.value == "ERROR"
    failures = _failures(bad)
    assert set(failures) == {
        ("expect_column_values_to_be_unique", "id"),
        ("expect_column_values_to_be_in_set", "currency"),
        ("expect_column_values_to_be_null", "amount_over_2dp"),
    }
    assert failures[("expect_column_values_to_be_unique", "id")]["unexpected_count"] == 2
    assert "'XXX'" in failures[("expect_column_values_to_be_in_set", "currency")]["sample"]
    assert "3.999" in failures[("expect_column_values_to_be_null", "amount_over_2dp")]["sample"]
    summary = bad.metadata["summary"].value
    assert "expect_column_values_to_be_unique" in summary and "`currency`" in summary
    assert bad.metadata["rows"].value == 4

    # And the good partition passes again: nothing of the bad one is remembered.
    assert _check(spark, GOOD).passed


def test_outcomes_keep_the_suite_order_with_counts_only_for_failures(spark: Any) -> None:
    expectations = TRANSACTION_SUITE.expectations()
    outcomes = validate(
        TRANSACTION_SUITE.view(spark.createDataFrame(BAD, SCHEMA)), "transactions", expectations
    )
    assert [o.expectation for o in outcomes] == [e.expectation_type for e in expectations]
    assert all(o.unexpected_count == 0 and not o.sample for o in outcomes if o.success)
    assert all(o.unexpected_count > 0 and o.sample for o in outcomes if not o.success)


def test_a_missing_column_fails_the_check_naming_its_expectations(spark: Any) -> None:
    df = spark.createDataFrame(GOOD, SCHEMA).drop("category")
    result = run_suite(df, "transactions", lambda d: d, TRANSACTION_SUITE.expectations())
    assert not result.passed
    assert {column for _, column in _failures(result)} >= {"category"}


@pytest.mark.parametrize("suite", [AXIOM_SUITE, TRANSACTION_SUITE], ids=["axioms", "transactions"])
def test_every_suite_ends_with_the_time_and_corrupt_row_expectations(suite: QualitySuite) -> None:
    import great_expectations as gx

    expectations = suite.expectations()
    own = suite.rules(gx.expectations)
    assert [e.configuration for e in expectations[: len(own)]] == [e.configuration for e in own]
    assert [(e.expectation_type, e.column) for e in expectations[len(own) :]] == [
        ("expect_column_values_to_match_regex", suite.time_column),
        ("expect_column_values_to_be_null", "timestamp_unparseable"),
        ("expect_column_values_to_be_null", CORRUPT),
    ]
