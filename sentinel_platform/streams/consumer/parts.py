"""A consumer's parts, built in one place, in dependency order.

Each part gets what it needs at construction: the recovery is told the lease it claims
under, what the consumer holds and whom to wake at a death; the heartbeat its side writes
and their failure log; nothing is patched after construction. What the parts call back on
their consumer is one small bundle, :class:`Hooks`.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Collection
from dataclasses import dataclass

from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.retention import Retention
from sentinel_platform.streams.backlog.zones import auto_maximum
from sentinel_platform.streams.consumer.calling.adaptive_limit import limit_for
from sentinel_platform.streams.consumer.calling.claims import Claims
from sentinel_platform.streams.consumer.calling.concurrency_limit import ConcurrencyLimit
from sentinel_platform.streams.consumer.calling.in_flight import Calls
from sentinel_platform.streams.consumer.calling.processor_call import ProcessorCall
from sentinel_platform.streams.consumer.healing.lease import Heartbeat, Lease, heartbeat_interval_s
from sentinel_platform.streams.consumer.healing.recovery import Recovery
from sentinel_platform.streams.consumer.healing.watchdog import HangWatchdog, InHand
from sentinel_platform.streams.consumer.metrics import Metrics
from sentinel_platform.streams.consumer.outages import Outages
from sentinel_platform.streams.consumer.outcomes import Prepared
from sentinel_platform.streams.consumer.processor import Processor
from sentinel_platform.streams.consumer.reading.group_read import GroupReader
from sentinel_platform.streams.consumer.reading.triage import Triage
from sentinel_platform.streams.consumer.settling.lag_and_holding import LagWriter
from sentinel_platform.streams.consumer.settling.outbox import Outbox
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys


@dataclass(frozen=True)
class Hooks:
    """What the parts call back on their consumer."""

    #: a call refused as busy (its message is parked)
    on_busy: Callable[[Prepared, float], None]
    #: another process took our consumer name
    on_name_taken: Callable[[], None]
    #: the message ids we hold (our recovery never claims them)
    in_hand: Callable[[], Collection[str]]
    #: the hang watchdog gives the worker up
    give_up: Callable[[], None]


@dataclass(frozen=True)
class Parts:
    lease: Lease
    reader: GroupReader
    in_hand: InHand
    calls: Calls
    outbox: Outbox
    claims: Claims | None
    recovery: Recovery
    triage: Triage
    outages: Outages
    retention: Retention
    lag: LagWriter
    heartbeat: Heartbeat


def build_parts(
    client: RedisClient,
    keys: StreamKeys,
    processor: Processor,
    settings: Settings,
    consumer: str,
    metrics: Metrics,
    stop: threading.Event,
    count: int,
    hooks: Hooks,
    limit: ConcurrencyLimit | None = None,
) -> Parts:
    """Every part of one consumer (``consumer``: its name in the group); ``limit`` is a
    shard's share of its worker's (``calling.shared_limit``), else the settings' own."""
    fields = {"stream": keys.stream, "group": keys.group, "consumer": consumer}
    ttl_ms = settings.lease_ttl_ms
    lease = Lease(client, keys, consumer, ttl_ms, settings.connection_liveness, stop)
    reader = GroupReader(client, keys, consumer, fields)
    in_hand = InHand()  # the messages in a call, for the hang watchdog
    calling = ProcessorCall(processor, settings, metrics, in_hand, fields)
    if limit is None:
        limit = limit_for(settings.worker_concurrency_pinned, auto_maximum(settings))
    # threads: the pinned number, or the maximum for auto
    calls = Calls(calling, calling.aborted, limit, settings.worker_concurrency, stop, hooks.on_busy)
    paid = bool(getattr(processor, "paid_calls", False))  # one paid call per key: claims.py
    outbox = Outbox(client, keys, settings, consumer, metrics, fields, releases_claims=paid)
    claims = Claims(client, keys, consumer, ttl_ms) if paid else None
    recovery = Recovery(
        client,
        keys,
        consumer,
        lease_ttl_ms=ttl_ms,
        reclaim_idle_ms=settings.reclaim_idle_ms,
        retry_backoff_ms=settings.retry_backoff_ms,
        metrics=metrics,
        lease_value=lease.value,  # claim only while the lease is ours
        in_hand=hooks.in_hand,  # our messages in hand are not retries
        on_death=reader.wake,  # a death cuts our blocked read short
    )
    triage = Triage(
        client, keys, processor, settings, consumer, calling.failed, calling.observe, fields, claims
    )
    outages = Outages(
        client,
        stop,
        fields,
        on_outage=recovery.grace.outage,  # leases may expire meanwhile: recovery_grace.py
        on_reset=reader.reset,  # it may be bound to a node that left
        uncommitted=lambda: len(outbox),
    )
    lag = LagWriter(client, keys, settings, consumer, metrics, calls, count, fields, claims)
    watchdog = HangWatchdog(in_hand, settings.hang_timeout_ms, hooks.give_up, fields)
    heartbeat = Heartbeat(
        lease,
        heartbeat_interval_s(ttl_ms, settings.lag_key_ttl_s),
        watchdog.check,  # before each refresh: the hang watchdog, nothing else
        fields,
        on_taken=hooks.on_name_taken,
        side_writes=lag.write,  # beside the refresh, never before it
        on_unreachable=recovery.grace.outage,
        failures=lag.failures,
    )
    retention = Retention(client, keys, settings, fields)
    return Parts(
        lease,
        reader,
        in_hand,
        calls,
        outbox,
        claims,
        recovery,
        triage,
        outages,
        retention,
        lag,
        heartbeat,
    )
