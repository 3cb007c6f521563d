"""An effect the client cannot send is a processor failure: retried, then dead-lettered."""

from __future__ import annotations

import pytest

from sentinel_platform.streams.consumer.processor import InvalidEffectError, check_effect


@pytest.mark.parametrize(
    ("result", "recent"),
    [
        ({"verdict": "ok"}, None),
        ({"verdict": "ok", "amount": 12.5, "count": 3}, "recent entry"),
        ({"score": 0, "zero": 0.0, "empty": ""}, ""),
    ],
)
def test_effects_of_strings_and_numbers_can_be_committed(result: dict, recent: object) -> None:
    check_effect(result, recent)


@pytest.mark.parametrize(
    ("result", "recent", "message"),
    [
        ({}, None, "no fields"),
        (None, None, "no fields"),
        ({"score": None}, None, "'score' is a NoneType"),
        ({"flagged": True}, None, "'flagged' is a bool"),
        ({"details": {"a": "1"}}, None, "'details' is a dict"),
        ({"tags": ["a"]}, None, "'tags' is a list"),
        ({"raw": b"bytes"}, None, "'raw' is a bytes"),
        ({1: "numeric name"}, None, "name 1 is not a string"),
        ({"verdict": "ok"}, {"not": "a string"}, "recent entry is a dict"),
    ],
)
def test_effects_the_client_cannot_send_are_refused_naming_the_field(
    result: object, recent: object, message: str
) -> None:
    with pytest.raises(InvalidEffectError, match=message):
        check_effect(result, recent)  # type: ignore[arg-type]
