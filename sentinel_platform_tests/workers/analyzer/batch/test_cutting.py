"""Cutting requests into batches: at the provider's request count and byte limits, in
order, a request too large for any batch set apart."""

from __future__ import annotations

import pytest

from workers.analyzer.batch.cutting import (
    ANTHROPIC_LIMITS,
    MB,
    OPENAI_LIMITS,
    BatchLimits,
    cut,
)


@pytest.mark.parametrize(
    ("items", "limits", "batches", "too_large"),
    [
        ([], BatchLimits(3, 100), [], []),
        ([10, 10, 10], BatchLimits(3, 100), [[10, 10, 10]], []),
        ([10, 10, 10, 10], BatchLimits(3, 100), [[10, 10, 10], [10]], []),  # count binds
        ([40, 40, 40], BatchLimits(10, 100), [[40, 40], [40]], []),  # bytes bind
        ([50, 50, 1], BatchLimits(10, 100), [[50, 50], [1]], []),  # exactly full
        ([50, 50], BatchLimits(10, 100, envelope=1), [[50], [50]], []),  # the envelope counts
        ([10, 101, 10], BatchLimits(10, 100), [[10, 10]], [101]),  # alone past the limit
        ([100], BatchLimits(10, 100), [[100]], []),
        ([30, 80, 30, 30], BatchLimits(2, 100), [[30], [80], [30, 30]], []),  # order kept
    ],
)
def test_requests_are_cut_at_both_limits_in_order(
    items: list[int], limits: BatchLimits, batches: list[list[int]], too_large: list[int]
) -> None:
    found = cut(items, lambda size: size, limits)
    assert (found.batches, found.too_large) == (batches, too_large)


@pytest.mark.parametrize(
    ("limits", "count", "size", "expected"),
    [
        (OPENAI_LIMITS, 120_000, 100, [50_000, 50_000, 20_000]),
        (OPENAI_LIMITS, 3, 100 * MB, [2, 1]),  # two 100 MB lines fill 200 MB
        (ANTHROPIC_LIMITS, 250_000, 100, [100_000, 100_000, 50_000]),
        (ANTHROPIC_LIMITS, 2, 128 * MB, [1, 1]),  # the wrapping bytes count too
    ],
)
def test_the_providers_documented_limits(
    limits: BatchLimits, count: int, size: int, expected: list[int]
) -> None:
    found = cut([size] * count, lambda size: size, limits)
    assert [len(batch) for batch in found.batches] == expected


@pytest.mark.parametrize("limits", [(0, 100), (10, 0), (10, 5, 5)])
def test_limits_that_hold_nothing_are_refused(limits: tuple[int, ...]) -> None:
    with pytest.raises(ValueError, match="hold nothing"):
        BatchLimits(*limits)
