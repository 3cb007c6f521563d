"""The ``model`` label of the tokens counter stays bounded, whatever the replies name."""

from __future__ import annotations

import pytest

from sentinel_platform.streams.consumer.token_metrics import MAX_NAME, model_label

CASES = [
    # (model named by the reply, names seen before, cap, label, names seen after)
    ("gpt-4o-mini", set(), 2, "gpt-4o-mini", {"gpt-4o-mini"}),
    ("gpt-4o-mini", {"gpt-4o-mini", "b"}, 2, "gpt-4o-mini", {"gpt-4o-mini", "b"}),
    ("c", {"a", "b"}, 2, "other", {"a", "b"}),  # past the cap: counted, not a new series
    (None, set(), 2, "unknown", {"unknown"}),
    ("  ", set(), 2, "unknown", {"unknown"}),
    ("m" * 300, set(), 2, "m" * MAX_NAME, {"m" * MAX_NAME}),
]


@pytest.mark.parametrize(("model", "seen", "cap", "label", "after"), CASES)
def test_model_label(
    model: str | None, seen: set[str], cap: int, label: str, after: set[str]
) -> None:
    assert model_label(model, seen, cap) == label
    assert seen == after
