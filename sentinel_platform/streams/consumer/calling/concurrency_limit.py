"""What the consumer asks of a concurrency limit (:class:`ConcurrencyLimit`), the change
it reports (:class:`LimitChange`) and the pinned limit (:class:`FixedLimit`), so the
consumer has one path for a pinned number and for
:class:`~sentinel_platform.streams.consumer.calling.adaptive_limit.AdaptiveLimit`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True)
class LimitChange:
    """The limit moved from ``previous`` to ``limit``; ``reason`` names the last cause
    (``latency``, ``growth``, ``drop``, ``probe``)."""

    previous: int
    limit: int
    reason: str


class ConcurrencyLimit(Protocol):
    """What the consumer asks of a limit, fixed or adaptive."""

    @property
    def limit(self) -> int: ...

    @property
    def steady_limit(self) -> int: ...

    def on_sample(self, rtt_s: float, in_flight: int) -> None: ...

    def on_drop(self, in_flight: int, rtt_s: float) -> None: ...

    def on_hold(self) -> None: ...

    def change(self) -> LimitChange | None: ...


class FixedLimit:
    """A pinned limit (``SENTINEL_WORKER_CONCURRENCY=<n>``): samples and drops change nothing."""

    def __init__(self, limit: int) -> None:
        if limit < 1:
            raise ValueError(f"a concurrency limit must be at least 1, got {limit}")
        self._limit = limit

    @property
    def limit(self) -> int:
        return self._limit

    @property
    def steady_limit(self) -> int:
        return self._limit

    def on_sample(self, rtt_s: float, in_flight: int) -> None:
        """Nothing to learn: the number is pinned."""

    def on_drop(self, in_flight: int, rtt_s: float) -> None:
        """Nothing to cut: the number is pinned."""

    def on_hold(self) -> None:
        """Nothing to hold: the number is pinned."""

    def change(self) -> LimitChange | None:
        return None
