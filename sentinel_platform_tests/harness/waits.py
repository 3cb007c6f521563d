"""The one poll with a deadline, for tests and benchmarks alike."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


class WaitTimeout(AssertionError, TimeoutError):
    """A condition did not hold in time: a failed test, a timed-out bench phase."""


def wait_until(
    condition: Callable[[], T], timeout_s: float = 10.0, interval_s: float = 0.02, what: str = ""
) -> T:
    """Poll ``condition`` until it returns something truthy and return that; raise
    :class:`WaitTimeout` naming ``what`` (or the condition) once ``timeout_s`` has passed."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise WaitTimeout(f"condition not met within {timeout_s}s: {what or condition}")
        time.sleep(interval_s)
