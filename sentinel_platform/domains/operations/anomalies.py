"""Delivery-count anomalies of one consumer group, judged from a bounded PEL scan.

Four kinds, each pointing at a different failure:
- *near limit*: one more failed delivery and the message is dead-lettered;
- *idle*: delivered longer ago than ``SENTINEL_RECLAIM_IDLE_MS`` and still unacked;
- *orphaned*: held by a consumer without a live lease (a dead worker) for longer than a
  lease TTL, i.e. longer than the lease protocol needs to notice;
- *stalled*: a consumer whose pending count did not go down once and grew over a whole
  window of ticks while its oldest pending id never moved (Burrow's rule: judge a window,
  never one sample). The count alone is no proof: a healthy worker raising its adaptive
  in-flight limit holds more at every tick, and settles all along; its oldest id moves.

Two waits are by design and no anomaly: messages a stopping worker handed back
(``HANDBACK_CONSUMER``, see :mod:`~sentinel_platform.domains.operations.handback`: idle
past every threshold and without a lease on purpose) are counted as ``handed_back``; and
a live worker's read-ahead idle past ``SENTINEL_RECLAIM_IDLE_MS`` while the analyzer's
capacity limits the drain (a hold, the pacing to a budget, a model server answering one
call at a time: :mod:`~sentinel_platform.domains.operations.lag_analyzer`) waits for the
analyzer, not for a stuck worker: it is counted as ``waiting_on_analyzer``.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sentinel_platform.domains.operations.handback import HANDBACK_CONSUMER
from sentinel_platform.settings import Settings
from sentinel_platform.streams.operators.group_view import (
    PendingEntry,
    live_consumers,
    pending_by_consumer,
    registered_consumers,
    scan_pending,
)
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys

SAMPLE_IDS = 10
STALL_WINDOW_TICKS = 5
_Sample = TypeVar("_Sample", int, str)


def near_limit_threshold(limit: int) -> int:
    """One delivery short of the limit, but never the first delivery (that is normal)."""
    return max(limit - 1, 2)


@dataclass(frozen=True)
class Anomalies:
    stream: str
    limit: int
    pending_total: int
    near_limit: list[PendingEntry] = field(default_factory=list)
    idle: list[PendingEntry] = field(default_factory=list)
    orphaned: dict[str, int] = field(default_factory=dict)  # consumer -> pending held
    orphaned_ids: dict[str, list[str]] = field(default_factory=dict)
    live: int = 0
    pending_per_consumer: dict[str, int] = field(default_factory=dict)
    #: messages a stopping worker handed back, waiting for the next live worker
    handed_back: int = 0
    #: live workers' messages idle past reclaim while an analyzer hold explains it
    waiting_on_analyzer: int = 0

    @property
    def over_limit(self) -> list[PendingEntry]:
        return [e for e in self.near_limit if e.deliveries >= self.limit]

    @property
    def any(self) -> bool:
        return bool(self.near_limit or self.idle or self.orphaned)

    def figures(self) -> dict[str, int]:
        return {
            "pending": self.pending_total,
            "near_limit": len(self.near_limit),
            "over_limit": len(self.over_limit),
            "idle": len(self.idle),
            "orphaned_consumers": len(self.orphaned),
            "orphaned_messages": sum(self.orphaned.values()),
            "live_consumers": self.live,
            "handed_back": self.handed_back,
            "waiting_on_analyzer": self.waiting_on_analyzer,
        }


def find_anomalies(
    client: RedisClient,
    keys: StreamKeys,
    settings: Settings,
    cap: int | None = None,
    analyzer_waits: Callable[[], bool] | None = None,
) -> Anomalies:
    """The anomalies of the group of ``keys``. ``analyzer_waits`` tells whether the
    analyzer's limits explain a live worker's idle messages (no anomaly then); it is
    asked only when there are such messages, since it reads the analyzer's figures."""
    per_consumer = pending_by_consumer(client, keys)
    entries = scan_pending(client, keys, cap) if cap else scan_pending(client, keys)
    names = sorted(set(registered_consumers(client, keys)) | set(per_consumer))
    alive = live_consumers(client, keys, names)
    threshold = near_limit_threshold(settings.reclaim_delivery_limit)
    by_consumer: dict[str, list[PendingEntry]] = defaultdict(list)
    for entry in entries:
        by_consumer[entry.consumer].append(entry)
    orphaned: dict[str, int] = {}
    orphaned_ids: dict[str, list[str]] = {}
    for consumer, count in per_consumer.items():
        if count <= 0 or consumer in alive or consumer == HANDBACK_CONSUMER:
            continue
        seen = by_consumer.get(consumer, [])
        if seen and max(e.idle_ms for e in seen) < settings.lease_ttl_ms:
            continue  # too fresh: the lease may simply not be visible yet
        orphaned[consumer] = count
        orphaned_ids[consumer] = [e.message_id for e in seen[:SAMPLE_IDS]]
    idle = [
        e
        for e in entries
        if e.idle_ms > settings.reclaim_idle_ms and e.consumer != HANDBACK_CONSUMER
    ]
    held_live = [e for e in idle if e.consumer in alive]
    waiting = held_live if held_live and analyzer_waits is not None and analyzer_waits() else []
    return Anomalies(
        stream=keys.stream,
        limit=settings.reclaim_delivery_limit,
        pending_total=sum(per_consumer.values()),
        near_limit=[e for e in entries if e.deliveries >= threshold],
        idle=[e for e in idle if e not in waiting],
        orphaned=orphaned,
        orphaned_ids=orphaned_ids,
        live=len(alive & set(names)),
        pending_per_consumer=per_consumer,
        handed_back=per_consumer.get(HANDBACK_CONSUMER, 0),
        waiting_on_analyzer=len(waiting),
    )


def slide_windows(
    windows: Mapping[str, list[_Sample]], current: Mapping[str, _Sample], size: int
) -> dict[str, list[_Sample]]:
    """Append this tick's sample (a pending count, an oldest id) per consumer holding
    pending entries; forget the others, so a window only spans ticks that held some.
    The hand-back holder has no window: it processes nothing, so it never settles, and
    what it holds grows with every stop until a worker claims it."""
    out: dict[str, list[_Sample]] = {}
    for consumer, sample in current.items():
        if sample and consumer != HANDBACK_CONSUMER:
            window = list(windows.get(consumer, ()))
            window.append(sample)
            out[consumer] = window[-size:]
    return out


def stalled(
    counts: dict[str, list[int]],
    oldest: Mapping[str, list[str]],
    size: int = STALL_WINDOW_TICKS,
) -> dict[str, list[int]]:
    """Consumers whose full window of counts never decreased and ended higher than it
    started, while their oldest pending id stayed the same over a full window too."""
    return {
        consumer: window
        for consumer, window in counts.items()
        if len(window) >= size
        and all(b >= a for a, b in itertools.pairwise(window))
        and window[-1] > window[0]
        and len(ids := oldest.get(consumer, [])) >= size
        and len(set(ids)) == 1
    }


def summarise(entries: list[PendingEntry]) -> dict[str, Any]:
    """Counts per consumer and a sample of ids, for alert details and check metadata."""
    per: dict[str, int] = defaultdict(int)
    for entry in entries:
        per[entry.consumer] += 1
    return {
        "count": len(entries),
        "by_consumer": dict(per),
        "ids": [e.message_id for e in entries[:SAMPLE_IDS]],
        "max_deliveries": max((e.deliveries for e in entries), default=0),
        "max_idle_ms": max((e.idle_ms for e in entries), default=0),
    }
