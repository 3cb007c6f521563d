"""Wire schemas: round-trips with Sentinel-L7 payloads, one rejection per field rule."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sentinel_platform.schemas import (
    DEMO_FIELD,
    Axiom,
    DeadLetter,
    SchemaError,
    Transaction,
    describe_error,
)

L7_TRANSACTION: dict[str, Any] = {
    "id": "txn-0001",
    "merchant": "Costco",
    "category": "grocery",
    "currency": "USD",
    "amount": 123.45,
    "message": "weekly shop",
    "is_threat": False,
    "source": "simulator",
    "timestamp": "2026-05-19T10:00:00+00:00",
}
L7_AXIOM = {
    "status": "critical",
    "metric_value": "97.5",
    "anomaly_score": "0.93",
    "source_id": "sensor-7",
    "emitted_at": "2026-05-19T10:00:00Z",
    "domain": "aml",
    "traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
}


def test_transaction_round_trips_through_the_data_field() -> None:
    fields = {"data": json.dumps(L7_TRANSACTION)}
    txn = Transaction.from_fields(fields)
    assert txn.natural_key == "txn-0001"
    again = Transaction.from_fields(txn.to_fields())
    assert again == txn
    assert json.loads(txn.to_fields()["data"]) == L7_TRANSACTION


def test_axiom_round_trips_flat_string_fields() -> None:
    axiom = Axiom.from_fields(L7_AXIOM)
    assert axiom.anomaly_score == pytest.approx(0.93)
    assert axiom.natural_key == "sensor-7|2026-05-19T10:00:00Z"
    fields = axiom.to_fields()
    assert all(isinstance(v, str) for v in fields.values())
    assert Axiom.from_fields(fields) == axiom


DEMO_CASES = [
    # (the entry's extra fields, the payload's extra keys, demo?)
    ({DEMO_FIELD: "1"}, {}, True),
    ({}, {}, False),
    ({DEMO_FIELD: "0"}, {}, False),
    ({DEMO_FIELD: "yes"}, {}, False),
    # a producer's own payload key of that name is not the mark
    ({}, {DEMO_FIELD: True}, False),
]


@pytest.mark.parametrize(("extra", "payload", "demo"), DEMO_CASES)
def test_the_demo_mark_is_the_entrys_own_field_and_never_written_back(
    extra: dict[str, str], payload: dict[str, Any], demo: bool
) -> None:
    txn = Transaction.from_fields({"data": json.dumps({**L7_TRANSACTION, **payload}), **extra})
    axiom = Axiom.from_fields({**L7_AXIOM, **extra})
    assert (txn.demo, axiom.demo) == (demo, demo)
    assert DEMO_FIELD not in axiom.to_fields()
    assert DEMO_FIELD not in json.loads(txn.to_fields()["data"])


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("id", ""),
        ("id", 17),
        ("merchant", None),
        ("category", "casino"),
        ("currency", "XXX"),
        ("amount", 0),
        ("amount", -3),
        ("amount", 1.234),
        # json.loads reads the Infinity and NaN that json.dumps writes.
        ("amount", float("inf")),
        ("amount", float("nan")),
        ("amount", "12.00"),
        ("amount", True),
        ("is_threat", "yes"),
        ("source", ""),
        ("timestamp", "yesterday"),
    ],
)
def test_transaction_rejects_each_bad_field_by_name(field: str, value: Any) -> None:
    payload = {**L7_TRANSACTION, field: value}
    with pytest.raises(SchemaError) as error:
        Transaction.from_fields({"data": json.dumps(payload)})
    assert error.value.field == field


@pytest.mark.parametrize("missing", ["id", "merchant", "category", "currency", "amount", "source"])
def test_transaction_rejects_missing_required_field(missing: str) -> None:
    payload = {k: v for k, v in L7_TRANSACTION.items() if k != missing}
    with pytest.raises(SchemaError) as error:
        Transaction.from_fields({"data": json.dumps(payload)})
    assert error.value.field == missing


@pytest.mark.parametrize(
    "fields", [{}, {"data": "{not json"}, {"data": "[1, 2]"}, {"payload": "{}"}]
)
def test_transaction_rejects_broken_envelopes_as_data_errors(fields: dict[str, str]) -> None:
    with pytest.raises(SchemaError) as error:
        Transaction.from_fields(fields)
    assert error.value.field == "data"


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("status", "ok"),
        ("metric_value", "NaN"),
        ("metric_value", "abc"),
        ("anomaly_score", "1.01"),
        ("anomaly_score", "-0.1"),
        ("source_id", ""),
        ("emitted_at", "2026-13-45"),
    ],
)
def test_axiom_rejects_each_bad_field_by_name(field: str, value: str) -> None:
    with pytest.raises(SchemaError) as error:
        Axiom.from_fields({**L7_AXIOM, field: value})
    assert error.value.field == field


def test_axiom_optional_fields_may_be_absent() -> None:
    minimal = {
        k: L7_AXIOM[k]
        for k in ("status", "metric_value", "anomaly_score", "source_id", "emitted_at")
    }
    axiom = Axiom.from_fields(minimal)
    assert axiom.domain is None
    assert "traceparent" not in axiom.to_fields()


def test_dead_letter_round_trips_with_the_original_payload() -> None:
    letter = DeadLetter(
        stream="synapse:axioms",
        group="axiom-workers",
        message_id="1-0",
        payload=json.dumps(L7_AXIOM),
        reason="invalid_message",
        error=describe_error(SchemaError("Axiom", "status", "bad")),
        deliveries=1,
        consumer="host-1",
        dead_lettered_at="2026-05-19T10:00:00Z",
    )
    fields = letter.to_fields()
    assert DeadLetter.from_fields(fields) == letter
    assert letter.original_fields == L7_AXIOM
    with pytest.raises(SchemaError) as error:
        DeadLetter.from_fields({**fields, "reason": "boom"})
    assert error.value.field == "reason"


def test_error_text_is_bounded() -> None:
    text = describe_error(RuntimeError("x" * 10_000))
    assert text.startswith("RuntimeError: ")
    assert len(text) <= 1000
