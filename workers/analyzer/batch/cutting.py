"""Cutting a lane's requests into batches a provider takes.

Each provider limits one batch by its number of requests and its size in bytes
(OpenAI: 50,000 requests in a JSONL file of 200 MB; Anthropic: 100,000 requests in a
256 MB request). :func:`cut` is pure: it keeps the requests' order, fills each batch as
far as both limits allow, and sets apart any request that alone exceeds the byte limit
(no batch can carry it: its message goes the real-time way or to the rules).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

T = TypeVar("T")

#: Megabytes as the providers count them (decimal, the smaller reading: a batch cut so
#: is within the limit whichever the provider meant).
MB = 1000 * 1000


@dataclass(frozen=True)
class BatchLimits:
    """The most one batch may hold: ``max_requests`` requests, ``max_bytes`` bytes in
    all (each request's size plus the batch's ``envelope``: what wraps the requests)."""

    max_requests: int
    max_bytes: int
    envelope: int = 0

    def __post_init__(self) -> None:
        if self.max_requests < 1 or self.max_bytes <= self.envelope:
            raise ValueError(f"batch limits hold nothing: {self}")


OPENAI_LIMITS = BatchLimits(max_requests=50_000, max_bytes=200 * MB)
#: Anthropic's batch is one JSON request: ``{"requests":[`` ... ``]}`` wraps the requests.
ANTHROPIC_LIMITS = BatchLimits(max_requests=100_000, max_bytes=256 * MB, envelope=15)


@dataclass(frozen=True)
class Cut(Generic[T]):
    """The batches, in order, and the requests too large for any batch."""

    batches: list[list[T]] = field(default_factory=list)
    too_large: list[T] = field(default_factory=list)


def cut(items: Sequence[T], size: Callable[[T], int], limits: BatchLimits) -> Cut[T]:
    """``items`` cut into batches of at most ``limits.max_requests`` items and
    ``limits.max_bytes`` bytes (``size`` of each item plus ``limits.envelope``), in
    order; an item that cannot fit an empty batch is set apart in ``too_large``."""
    room = limits.max_bytes - limits.envelope
    result: Cut[T] = Cut()
    batch: list[T] = []
    used = 0
    for item in items:
        bytes_ = size(item)
        if bytes_ > room:
            result.too_large.append(item)
            continue
        if batch and (len(batch) == limits.max_requests or used + bytes_ > room):
            result.batches.append(batch)
            batch, used = [], 0
        batch.append(item)
        used += bytes_
    if batch:
        result.batches.append(batch)
    return result
