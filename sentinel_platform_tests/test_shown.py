"""What a decider is shown of a transaction: every wire field is either shown or truth, the
shown payload never holds the truth, and the truth goes beside the verdict as ``label``."""

from __future__ import annotations

import json
from typing import Any

import pytest

from sentinel_platform.schemas import Transaction
from sentinel_platform.shown import SHOWN_FIELDS, TRUTH_FIELDS, shown, truth_of

ROW: dict[str, Any] = {
    "id": "txn-1",
    "merchant": "RapidRemit",
    "category": "suspicious",
    "currency": "USD",
    "amount": 497.5,
    "message": "Gift card reload - send asap",
    "source": "simulator",
    "timestamp": "2026-11-21T10:00:00Z",
}


def txn(**overrides: Any) -> Transaction:
    return Transaction.from_fields({"data": json.dumps({**ROW, **overrides})})


def test_every_wire_field_is_either_shown_or_truth() -> None:
    """A new field of the wire model is a decision: shown to deciders, or truth kept from them."""
    assert set(SHOWN_FIELDS) | set(TRUTH_FIELDS) == set(Transaction.model_fields)
    assert not set(SHOWN_FIELDS) & set(TRUTH_FIELDS)


@pytest.mark.parametrize("label", [True, False, None])
def test_the_shown_payload_is_the_payment_without_its_truth(label: bool | None) -> None:
    payload = shown(txn(is_threat=label)).payload()
    assert payload == ROW
    assert "is_threat" not in json.dumps(payload)


@pytest.mark.parametrize(
    ("label", "kept"),
    [(True, {"label": "true"}), (False, {"label": "false"}), (None, {})],
)
def test_the_truth_kept_beside_the_verdict(label: bool | None, kept: dict[str, str]) -> None:
    assert truth_of(txn(is_threat=label)) == kept
