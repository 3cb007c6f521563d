"""Hypothesis strategies for hostile stream entries: what a buggy or malicious producer sends.

Each strategy yields a *field map* as it would arrive from XREADGROUP (string keys and
values; Redis has no other types), built to break a parser: random maps, broken JSON,
valid JSON of the wrong shape, wrong types per field, huge values, unicode everywhere.
Some generated entries are accidentally valid (a unicode merchant name is a fine
merchant name); the tests use the processor's own ``parse`` as the oracle for which
outcome to expect, and separately prove ``parse`` never fails any other way.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import strategies as st

#: Any unicode except lone surrogates, which cannot be encoded for the wire at all.
CHARS = st.characters(blacklist_categories=("Cs",))
HUGE = 100_000


def text(max_size: int = 40, min_size: int = 0) -> st.SearchStrategy[str]:
    return st.text(CHARS, min_size=min_size, max_size=max_size)


def json_values() -> st.SearchStrategy[Any]:
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=False, allow_infinity=False),
        text(20),
    )
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=3), st.dictionaries(text(8), inner, max_size=3)
        ),
        max_leaves=6,
    )


def huge_text() -> st.SearchStrategy[str]:
    return st.sampled_from(["x", "é", "𝄞", "\x00"]).map(lambda char: char * HUGE)


def random_field_map(min_size: int = 1) -> st.SearchStrategy[dict[str, str]]:
    return st.dictionaries(text(20), text(60), min_size=min_size, max_size=6)


# --- transactions: one field "data" holding a JSON object ------------------------------


def valid_transaction(txn_id: str = "t-1") -> dict[str, Any]:
    return {
        "id": txn_id,
        "merchant": "ACME Corp",
        "category": "retail",
        "currency": "EUR",
        "amount": 12.5,
        "message": "coffee",
        "source": "drill",
        "timestamp": "2026-01-01T00:00:00Z",
    }


@st.composite
def transaction_wrong_type(draw: st.DrawFn) -> dict[str, str]:
    body = valid_transaction()
    name = draw(st.sampled_from(sorted(body)))
    body[name] = draw(json_values())
    return {"data": json.dumps(body)}


@st.composite
def transaction_huge_value(draw: st.DrawFn) -> dict[str, str]:
    body = valid_transaction()
    body[draw(st.sampled_from(["id", "merchant", "message", "source", "timestamp"]))] = draw(
        huge_text()
    )
    return {"data": json.dumps(body)}


@st.composite
def transaction_unicode(draw: st.DrawFn) -> dict[str, str]:
    body = valid_transaction()
    for name in draw(st.sets(st.sampled_from(["merchant", "message", "source", "id"]))):
        body[name] = draw(text(30, min_size=1))
    return {"data": json.dumps(body, ensure_ascii=draw(st.booleans()))}


@st.composite
def transaction_broken_json(draw: st.DrawFn) -> dict[str, str]:
    encoded = json.dumps(valid_transaction())
    cut = draw(st.integers(min_value=0, max_value=len(encoded) - 1))
    garbage = draw(st.one_of(st.just(encoded[:cut]), text(80), st.just(encoded + "}")))
    return {"data": garbage}


def transaction_wrong_shape() -> st.SearchStrategy[dict[str, str]]:
    return (
        json_values()
        .filter(lambda v: not isinstance(v, dict))
        .map(lambda v: {"data": json.dumps(v)})
    )


def hostile_transactions() -> st.SearchStrategy[dict[str, str]]:
    return st.one_of(
        random_field_map(),
        transaction_broken_json(),
        transaction_wrong_shape(),
        transaction_wrong_type(),
        transaction_huge_value(),
        transaction_unicode(),
        random_field_map().map(lambda fields: {**fields, "data": json.dumps(valid_transaction())}),
    )


# --- axioms: flat string fields ----------------------------------------------------------


def valid_axiom(source_id: str = "sensor-1") -> dict[str, str]:
    return {
        "status": "nominal",
        "metric_value": "1.5",
        "anomaly_score": "0.25",
        "source_id": source_id,
        "emitted_at": "2026-01-01T00:00:00Z",
        "domain": "drill",
    }


@st.composite
def axiom_wrong_value(draw: st.DrawFn) -> dict[str, str]:
    fields = valid_axiom()
    name = draw(st.sampled_from(sorted(fields)))
    value = draw(json_values())
    fields[name] = value if isinstance(value, str) else json.dumps(value)
    return fields


@st.composite
def axiom_missing_field(draw: st.DrawFn) -> dict[str, str]:
    fields = valid_axiom()
    for name in draw(st.sets(st.sampled_from(sorted(fields)), min_size=1, max_size=3)):
        fields.pop(name)
    return fields or {"unrelated": "1"}


@st.composite
def axiom_huge_value(draw: st.DrawFn) -> dict[str, str]:
    fields = valid_axiom()
    fields[draw(st.sampled_from(sorted(fields)))] = draw(huge_text())
    return fields


@st.composite
def axiom_unicode(draw: st.DrawFn) -> dict[str, str]:
    fields = valid_axiom()
    for name in draw(st.sets(st.sampled_from(["source_id", "domain", "status"]))):
        fields[name] = draw(text(30, min_size=1))
    return fields


def hostile_axioms() -> st.SearchStrategy[dict[str, str]]:
    return st.one_of(
        random_field_map(),
        axiom_wrong_value(),
        axiom_missing_field(),
        axiom_huge_value(),
        axiom_unicode(),
        st.builds(
            lambda extra, base: {**extra, **base}, random_field_map(), st.just(valid_axiom())
        ),
    )
