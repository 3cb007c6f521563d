"""A generated day of transactions in a real local Spark: threats at the 2% base rate, each
typology present with its label, the rules meeting each as declared, the same rows for the
same seed whatever the partitioning, and the typology kept off the wire."""

from __future__ import annotations

import json
from collections import Counter
from datetime import date
from typing import Any

import pytest

from sentinel_platform.domains.shared.generation import generate_transactions
from sentinel_platform.registry import TRANSACTIONS
from sentinel_platform.resources.wire_columns import transaction_frame
from sentinel_platform.schemas import Transaction
from sentinel_platform.settings import Settings
from sentinel_platform_tests.domains.shared.test_typologies import EXPECTED
from workers.processors.transactions import evaluate_rules

DAY = date(2026, 11, 21)
ROWS = 20_000
#: Four standard deviations of a 2% share over ROWS rows.
TOLERANCE = 0.004


@pytest.fixture(scope="module")
def day_rows(spark: Any) -> list[Any]:
    return generate_transactions(spark, DAY, ROWS, seed=7, partitions=2).collect()


def test_a_day_has_the_base_rate_and_every_typology_with_its_label(day_rows: list[Any]) -> None:
    assert len(day_rows) == ROWS
    threats = sum(row["is_threat"] for row in day_rows) / ROWS
    assert threats == pytest.approx(0.02, abs=TOLERANCE)
    labels = {(row["typology"], row["is_threat"]) for row in day_rows}
    assert labels == {("ordinary", False), *((t, e[0]) for t, e in EXPECTED.items())}
    counted = Counter(row["typology"] for row in day_rows)
    assert min(counted[t] for t in EXPECTED) >= 60, counted


def test_the_rules_catch_some_typologies_and_miss_others_on_generated_rows(
    day_rows: list[Any], rules_settings: Settings
) -> None:
    said: dict[str, set[bool]] = {t: set() for t in EXPECTED}
    for row in day_rows:
        if row["typology"] in said:
            wire = {c: row[c] for c in TRANSACTIONS.columns}
            txn = Transaction.from_fields({"data": json.dumps(wire)})
            said[row["typology"]].add(evaluate_rules(txn, rules_settings).is_threat)
    assert said == {t: {e[1]} for t, e in EXPECTED.items()}


def test_the_same_seed_makes_the_same_rows_on_any_partitioning(spark: Any) -> None:
    one = generate_transactions(spark, DAY, 2_000, seed=3, partitions=1).collect()
    three = generate_transactions(spark, DAY, 2_000, seed=3, partitions=3).collect()
    other = generate_transactions(spark, DAY, 2_000, seed=4, partitions=1).collect()
    assert one == three
    assert one != other


def test_the_typology_stays_off_the_wire(spark: Any) -> None:
    frame = transaction_frame(generate_transactions(spark, DAY, 500, seed=7, partitions=2))
    entries = [json.loads(row["data"]) for row in frame.collect()]
    assert all(set(entry) == set(TRANSACTIONS.columns) for entry in entries)
    assert any(entry["is_threat"] for entry in entries), "the truth itself stays on the wire"
