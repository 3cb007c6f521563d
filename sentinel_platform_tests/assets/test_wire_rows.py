"""Rows built for the streams are exactly the wire models' field maps."""

from __future__ import annotations

import pydantic
import pytest

from sentinel_platform.schemas import Axiom, Transaction
from sentinel_platform.streams.publish import PublishStats, axiom_fields, transaction_fields

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
