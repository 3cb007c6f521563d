"""Billed means counted: an answer with ``usage`` but no verdict leaves as
:class:`UnusableAnswer` carrying what it cost, and a fallback entry records it."""

from __future__ import annotations

import pickle

import pytest

from workers.analyzer import AnalyzerError, AnalyzerExhausted, UnusableAnswer, Usage
from workers.analyzer.answers.billed import billed, billed_fields

USAGE = Usage(1117, 400, 1024)


@pytest.mark.parametrize(
    ("raised", "usage", "expected"),
    [
        # (the error read raises, the reply's usage, what leaves the block: type, usage)
        (AnalyzerError("cut"), USAGE, (UnusableAnswer, USAGE)),
        (AnalyzerError("cut"), None, (AnalyzerError, None)),  # nothing known to count
        (UnusableAnswer("x", Usage(1, 2), "m"), USAGE, (UnusableAnswer, Usage(1, 2))),
        (AnalyzerExhausted("q", None, "c"), USAGE, (AnalyzerExhausted, None)),  # kept
        (ValueError("not ours"), USAGE, (ValueError, None)),
    ],
)
def test_an_error_reading_a_billed_reply_carries_its_usage(
    raised: Exception, usage: Usage | None, expected: tuple[type[Exception], Usage | None]
) -> None:
    with pytest.raises(Exception) as caught, billed(usage, "gpt-4o-mini"):
        raise raised
    kind, carried = expected
    assert type(caught.value) is kind
    assert getattr(caught.value, "usage", None) == carried
    assert str(caught.value) == str(raised), "the message is the reading's own"


def test_a_verdict_read_in_the_block_leaves_untouched() -> None:
    with billed(USAGE, "m"):
        value = 42
    assert value == 42


@pytest.mark.parametrize(
    ("exc", "fields"),
    [
        (
            UnusableAnswer("cut", USAGE, "gpt-4o-mini-2024-07-18"),
            {
                "model": "gpt-4o-mini-2024-07-18",
                "input_tokens": "1117",
                "output_tokens": "400",
                "cached_input_tokens": "1024",
            },
        ),
        (UnusableAnswer("cut", Usage(10, 20), None), {"input_tokens": "10", "output_tokens": "20"}),
        (AnalyzerError("HTTP 400"), {}),
        (TimeoutError(), {}),
    ],
)
def test_a_fallback_records_what_its_failed_call_was_billed(
    exc: BaseException, fields: dict[str, str]
) -> None:
    assert billed_fields(exc) == fields


def test_the_billed_error_survives_a_pickle() -> None:
    again = pickle.loads(pickle.dumps(UnusableAnswer("cut", USAGE, "m")))
    assert (str(again), again.usage, again.model) == ("cut", USAGE, "m")
