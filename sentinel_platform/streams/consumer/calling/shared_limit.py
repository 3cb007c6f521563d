"""One worker's in-flight limit over the consumers of a stream's shards.

A worker of a sharded stream runs one consumer per shard (each its own group, lease,
recovery and commits), but behind them is one processor: the analyzer's capacity is the
worker's, not a shard's. So the shards share one limit, fixed or adaptive: it learns from
the calls of every shard, and each shard's consumer may have :func:`share` of it in
flight, the limit split as evenly as whole calls allow.

Why a split and not one pool of slots any shard may take: a pool needs a shard waiting
for a slot to be woken when another's call ends, and a shard that finishes a call takes
the slot back at once, so a busy shard would starve the others. The split needs neither
a lock on the call path nor a wake-up, and the consumer stays as it is (its limit is just
smaller). What it costs: a shard with no work leaves its share unused, so one hot shard
gets ``limit / N`` of the worker. Rows route to shards by the CRC-32 of their natural key
(``sharding.routing``), which spreads them evenly, and an adaptive limit climbs while the
calls it serves stay fast, so a hot shard raises the limit it is a share of.

Each share reports its calls to the limit with the calls of the other shards in flight
added (what the service sees from this worker), under one lock: the consumers call from
their own threads, and :class:`~.adaptive_limit.AdaptiveLimit` is single-threaded.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from sentinel_platform.streams.consumer.calling.concurrency_limit import (
    ConcurrencyLimit,
    LimitChange,
)


def share(total: int, shards: int, shard: int) -> int:
    """Shard ``shard``'s part of ``total`` calls over ``shards``: ``total // shards``, one
    more for the first ``total % shards``, never below one (a shard with no call in
    flight is a shard nobody serves)."""
    if shards < 1 or not 0 <= shard < shards:
        raise ValueError(f"shard {shard} of {shards}")
    return max(1, total // shards + (1 if shard < total % shards else 0))


class SharedLimit:
    """``limit`` shared by ``shards`` consumers: :meth:`for_shard` gives each its share."""

    def __init__(self, limit: ConcurrencyLimit, shards: int) -> None:
        self._limit = limit
        self.shards = shards
        self._lock = threading.Lock()
        self._running: list[Callable[[], int]] = [lambda: 0] * shards

    def for_shard(self, shard: int) -> LimitShare:
        share(1, self.shards, shard)  # refuses a shard out of range
        return LimitShare(self, shard)

    def count_running(self, shard: int, running: Callable[[], int]) -> None:
        """How to read ``shard``'s calls in flight (its consumer's, once built)."""
        self._running[shard] = running

    def others_running(self, shard: int) -> int:
        """Calls in flight on the other shards now (plain reads: a moment stale at most)."""
        return sum(read() for k, read in enumerate(self._running) if k != shard)

    @property
    def total(self) -> int:
        return self._limit.limit

    @property
    def steady_total(self) -> int:
        return self._limit.steady_limit

    def on_sample(self, rtt_s: float, in_flight: int) -> None:
        with self._lock:
            self._limit.on_sample(rtt_s, in_flight)

    def on_drop(self, in_flight: int, rtt_s: float) -> None:
        with self._lock:
            self._limit.on_drop(in_flight, rtt_s)

    def on_hold(self) -> None:
        with self._lock:
            self._limit.on_hold()

    def change(self) -> LimitChange | None:
        with self._lock:
            return self._limit.change()


class LimitShare:
    """One shard's part of a :class:`SharedLimit`, as its consumer's limit
    (``ConcurrencyLimit``)."""

    def __init__(self, shared: SharedLimit, shard: int) -> None:
        self._shared = shared
        self._shard = shard

    @property
    def limit(self) -> int:
        return share(self._shared.total, self._shared.shards, self._shard)

    @property
    def steady_limit(self) -> int:
        return share(self._shared.steady_total, self._shared.shards, self._shard)

    def count_running(self, running: Callable[[], int]) -> None:
        """How to read this shard's calls in flight (its consumer's ``Calls.running``)."""
        self._shared.count_running(self._shard, running)

    def on_sample(self, rtt_s: float, in_flight: int) -> None:
        self._shared.on_sample(rtt_s, in_flight + self._shared.others_running(self._shard))

    def on_drop(self, in_flight: int, rtt_s: float) -> None:
        self._shared.on_drop(in_flight + self._shared.others_running(self._shard), rtt_s)

    def on_hold(self) -> None:
        self._shared.on_hold()

    def change(self) -> LimitChange | None:
        """A change of the worker's limit, told by the first share to ask (one line per
        change, not one per shard)."""
        return self._shared.change()
