"""Argument types for every command line (``sentinel`` and the worker entry point).

argparse reports a type function that raises ``ValueError`` as ``invalid <__name__> value``,
which shows an internal function name to the operator. Each type here raises
``ArgumentTypeError`` instead, so the message reads
``argument --worker-concurrency: expected a whole number >= 1, got 'abc'``.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def whole_number(minimum: int = 0, maximum: int | None = None) -> Callable[[str], int]:
    """An ``int`` option between ``minimum`` and ``maximum`` (inclusive)."""
    expected = (
        f"a whole number >= {minimum}"
        if maximum is None
        else f"a whole number from {minimum} to {maximum}"
    )

    def parse(value: str) -> int:
        try:
            number = int(value.strip())
        except ValueError:
            number = None
        if number is None or number < minimum or (maximum is not None and number > maximum):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {value!r}")
        return number

    return parse


def seconds(minimum: float = 0.0) -> Callable[[str], float]:
    """A finite number of seconds of at least ``minimum``."""

    def parse(value: str) -> float:
        try:
            number = float(value.strip())
        except ValueError:
            number = math.nan
        if not math.isfinite(number) or number < minimum:
            raise argparse.ArgumentTypeError(
                f"expected a number of seconds >= {minimum:g}, got {value!r}"
            )
        return number

    return parse


#: A TCP port.
port = whole_number(1, 65_535)
#: A count of one or more.
positive = whole_number(1)
#: A count of zero or more.
non_negative = whole_number(0)


def concurrency(value: str) -> int | str:
    """``auto`` (the worker finds its in-flight limit) or a whole number >= 1 (pinned)."""
    if value.strip().lower() == "auto":
        return "auto"
    try:
        return positive(value)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected auto or a whole number >= 1, got {value!r}"
        ) from None
