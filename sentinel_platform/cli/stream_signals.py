"""The platform's health as Prometheus reads it, per stream, read from Redis at scrape time.

Workers serve their own counters, but when every worker is down nothing they serve
exists, and that is exactly when an operator needs the backlog. This collector runs
elsewhere (``sentinel exporter``, started by ``sentinel up``) and reads what ``sentinel
status`` reads, through the same function (:func:`~sentinel_platform.cli.status.stream_state`),
so a zone, a seconds-of-work figure or a live-worker count here is the one the status
command, the lag sensor and the producers act on.

Series are per stream (labels ``stream``, the Redis key as the workers label it, and
``group``); dead-letter streams are per ``dlq`` (one DLQ may serve several streams); the
fleet's holds on the analyzer per ``analyzer_id`` (with its redacted URL and the cause). No
series carries a worker's consumer name, which is new on every restart.

A scrape reads Redis in one thread the collector owns and waits at most ``timeout_s``
for it: a slow or frozen server costs a scrape that many seconds and then answers
``sentinel_exporter_redis_up 0``, never a hung scrape; while a read is still running
the next scrape waits on it rather than starting another. :func:`read_signals` is the
I/O, :func:`families` the pure translation into metric families (table-tested).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import redis
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from sentinel_platform.cli.batch_signals import batch_families, read_stream_batch
from sentinel_platform.cli.provisional_signals import (
    provisional_families,
    read_stream_provisional,
)
from sentinel_platform.cli.status import ZONE_ORDER, StreamState, analyzer_holds, stream_state
from sentinel_platform.redaction import scrub
from sentinel_platform.registry import stream_specs
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.at_provider import NOTHING as NO_BATCH
from sentinel_platform.streams.backlog.at_provider import BatchBacklog
from sentinel_platform.streams.backlog.entry_ages import oldest_pending_age_s, server_now_s
from sentinel_platform.streams.backlog.provisional import NOTHING, ProvisionalBacklog
from sentinel_platform.streams.backlog.zones import limits_from_settings
from sentinel_platform.streams.operators.analyzer_holds import Hold
from sentinel_platform.streams.plumbing.connection import RedisClient, RedisConnectError
from sentinel_platform.streams.plumbing.eviction_policy import RANK, server_verdict
from sentinel_platform.streams.plumbing.keys import keys_for
from sentinel_platform.streams.sharding.shards import dlq_streams_of

log = logging.getLogger("sentinel.exporter")

#: Longest a scrape waits for Redis before answering ``sentinel_exporter_redis_up 0``
#: (below Prometheus' default scrape timeout of 10 s).
DEFAULT_TIMEOUT_S = 5.0
STREAM_LABELS = ("stream", "group")
#: Why a read gave nothing (``sentinel_exporter_read_errors_total{reason}``).
ERROR_REASONS = ("timeout", "redis")
EVICTION_VERDICTS = tuple(RANK)


@dataclass(frozen=True)
class StreamSignals:
    """One stream as a scrape read it."""

    name: str
    state: StreamState
    oldest_pending_age_s: float
    #: its provisional verdicts, waiting to be re-screened (over its shards)
    provisional: ProvisionalBacklog = NOTHING
    #: its batch lane: waiting for a batch, at the provider (over its shards); never lag
    batch: BatchBacklog = NO_BATCH


@dataclass(frozen=True)
class DlqSignals:
    dlq: str
    entries: int
    #: XINFO STREAM ``entries-added``: every dead letter ever added (trims do not lower it)
    added: int


@dataclass(frozen=True)
class Reading:
    streams: Sequence[StreamSignals]
    dlqs: Sequence[DlqSignals]
    #: the eviction verdict on the server's maxmemory-policy (ok, unknown, warn, refuse)
    eviction: str
    #: the fleet's holds on the analyzer (``sentinel status`` shows the same)
    holds: Sequence[Hold] = ()


def read_dlq(client: RedisClient, dlq: str) -> DlqSignals:
    """A DLQ's length and its count of entries ever added (0 and 0 before it exists)."""
    try:
        info = client.xinfo_stream(dlq)
    except redis.ResponseError:  # no such key yet
        return DlqSignals(dlq, 0, 0)
    entries = int(info.get("length") or 0)
    added = info.get("entries-added")
    return DlqSignals(dlq, entries, int(added) if added is not None else entries)


def read_signals(client: RedisClient, settings: Settings) -> Reading:
    """Everything a scrape serves, read from Redis (the same reads as ``sentinel status``,
    less the dead-letter scan by source stream, plus each group's oldest pending entry)."""
    now_s = server_now_s(client)
    streams = []
    for spec in stream_specs(settings):
        keys = keys_for(settings, spec)
        state = stream_state(client, settings, keys, None, spec.name)
        oldest = oldest_pending_age_s(client, keys, now_s)
        provisional = read_stream_provisional(client, settings, spec)
        batch = read_stream_batch(client, settings, spec)
        streams.append(StreamSignals(spec.name, state, oldest, provisional, batch))
    dlqs = [read_dlq(client, dlq) for dlq in dlq_streams_of(client, settings)]
    eviction = server_verdict(client, settings.allow_evicting_server).level
    return Reading(streams, dlqs, eviction, analyzer_holds(client, settings))


def _gauge(name: str, text: str, labels: Sequence[str] = STREAM_LABELS) -> GaugeMetricFamily:
    return GaugeMetricFamily(name, text, labels=list(labels))


def stream_families(reading: Reading, settings: Settings) -> list[Metric]:
    """The per-stream families of ``reading``."""
    limits = limits_from_settings(settings)
    info = _gauge(
        "sentinel_stream_info",
        "Always 1: the stream's registry name and dead-letter stream, to join on.",
        (*STREAM_LABELS, "name", "dlq"),
    )
    gauges = {
        "backlog": _gauge(
            "sentinel_stream_backlog_messages", "Entries not yet delivered to the group."
        ),
        "pending": _gauge(
            "sentinel_stream_pending_messages",
            "Entries delivered to the group and not yet acknowledged.",
        ),
        "lag": _gauge(
            "sentinel_stream_lag_messages",
            "Backlog plus pending: the lag the producers and the zones act on.",
        ),
        "oldest": _gauge(
            "sentinel_stream_oldest_pending_age_seconds",
            "Age of the group's oldest pending message (now minus its entry id's time); "
            "0 when nothing is pending.",
        ),
        "live": _gauge(
            "sentinel_stream_live_workers", "Consumers of the group holding their lease now."
        ),
        "work": _gauge(
            "sentinel_stream_work_seconds",
            "Seconds of queued work at the fleet's drain rate; absent when no rate is known.",
        ),
        "rate": _gauge(
            "sentinel_stream_drain_rate_messages_per_second",
            "The fleet's drain rate as the producers measured it; absent when unknown.",
        ),
        "allowance": _gauge(
            "sentinel_stream_in_flight_allowance_messages",
            "What the live workers published they may hold in flight, summed.",
        ),
        "paused": _gauge(
            "sentinel_stream_producer_paused", "1 while the lag gate holds the producers."
        ),
        "lease": _gauge(
            "sentinel_stream_lease_ttl_seconds",
            "A worker's lease TTL (SENTINEL_LEASE_TTL_MS): a message pending longer than a "
            "few leases is stuck.",
        ),
    }
    zone = _gauge(
        "sentinel_stream_zone",
        "The stream's zone, as `sentinel status` judges it: 1 for the zone it is in.",
        (*STREAM_LABELS, "zone"),
    )
    pause = _gauge(
        "sentinel_stream_pause_limit_seconds",
        "Seconds of work at which the producers pause (SENTINEL_LAG_PAUSE_S); absent "
        "with count limits (SENTINEL_LAG_PAUSE).",
    )
    read = CounterMetricFamily(
        "sentinel_stream_entries_read",
        "Entries the group has read (its entries-read counter).",
        labels=list(STREAM_LABELS),
    )
    for stream in reading.streams:
        s = stream.state
        labels = [s.stream, s.group]
        info.add_metric([*labels, stream.name, s.dlq], 1)
        values: dict[str, float | None] = {
            "backlog": s.backlog,
            "pending": s.pending,
            "lag": s.lag,
            "oldest": stream.oldest_pending_age_s,
            "live": s.live_workers,
            "work": s.work_s,
            "rate": s.drain_rate_per_s,
            "allowance": s.in_flight_allowance,
            "paused": int(s.producer_paused),
            "lease": settings.lease_ttl_ms / 1000,
        }
        for key, value in values.items():
            if value is not None:
                gauges[key].add_metric(labels, value)
        for name in ZONE_ORDER:
            zone.add_metric([*labels, name], int(name == s.zone))
        if limits.unit == "seconds":
            pause.add_metric(labels, limits.pause_s)
        if s.processed is not None:
            read.add_metric(labels, s.processed)
    provisional = [([s.state.stream, s.state.group], s.provisional) for s in reading.streams]
    waiting = provisional_families(provisional, STREAM_LABELS)
    lanes = batch_families(
        [([s.state.stream, s.state.group], s.batch) for s in reading.streams], STREAM_LABELS
    )
    return [info, *gauges.values(), zone, pause, read, *waiting, *lanes]


def families(reading: Reading, settings: Settings) -> list[Metric]:
    """``reading`` as metric families: per stream, per DLQ, and the server's verdict."""
    entries = _gauge("sentinel_dlq_entries", "Entries in the dead-letter stream.", ("dlq",))
    capacity = _gauge(
        "sentinel_dlq_capacity_entries",
        "SENTINEL_DLQ_MAXLEN: past it the oldest dead letters are trimmed.",
        ("dlq",),
    )
    added = CounterMetricFamily(
        "sentinel_dlq_added",
        "Dead letters ever added to the stream (XINFO entries-added; trims do not lower it).",
        labels=["dlq"],
    )
    for dlq in reading.dlqs:
        entries.add_metric([dlq.dlq], dlq.entries)
        capacity.add_metric([dlq.dlq], settings.dlq_maxlen)
        added.add_metric([dlq.dlq], dlq.added)
    eviction = _gauge(
        "sentinel_redis_eviction_verdict",
        "The verdict on the server's maxmemory-policy: 1 for the current one (ok: "
        "noeviction; warn: volatile-*; refuse: allkeys-*; unknown: not reported).",
        ("verdict",),
    )
    for verdict in EVICTION_VERDICTS:
        eviction.add_metric([verdict], int(verdict == reading.eviction))
    held = _gauge(
        "sentinel_analyzer_hold_seconds",
        "Seconds left of the fleet's hold on an analyzer (no worker calls it meanwhile); "
        "+Inf: until `sentinel analyzer release`; absent: no hold.",
        ("analyzer_id", "analyzer", "cause"),
    )
    key_held = _gauge(
        "sentinel_analyzer_key_hold_seconds",
        "Seconds left of the hold on one key of an analyzer (the provider rejected it: no "
        "worker calls with it; workers on another key do); +Inf: until released or the "
        "workers read another key; absent: no hold.",
        ("analyzer_id", "analyzer", "cause", "key"),
    )
    for hold in reading.holds:
        left = math.inf if hold.seconds_left is None else hold.seconds_left
        if hold.key_digest:
            key_held.add_metric([hold.analyzer_id, hold.analyzer, hold.cause, hold.key], left)
        else:
            held.add_metric([hold.analyzer_id, hold.analyzer, hold.cause], left)
    families = [entries, capacity, added, eviction, held, key_held]
    return [*stream_families(reading, settings), *families]


class StreamCollector(Collector):
    """A prometheus-client collector that reads Redis when scraped, within ``timeout_s``.

    ``connect`` opens a client (it may raise :class:`RedisConnectError`); the client is
    kept between scrapes and dropped after any Redis error, so the next scrape reconnects.
    :meth:`close` starts no further read and waits for none.
    """

    def __init__(
        self,
        settings: Settings,
        connect: Callable[[], RedisClient],
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        self.settings = settings
        self.timeout_s = timeout_s
        self._connect = connect
        self._client: RedisClient | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._running: concurrent.futures.Future[Reading] | None = None
        self._errors = dict.fromkeys(ERROR_REASONS, 0)

    def describe(self) -> list[Metric]:
        """Nothing up front: describing must not read Redis (it runs at registration)."""
        return []

    def _read(self) -> Reading:
        """On the reading thread: read, reconnecting first if the last read failed."""
        try:
            if self._client is None:
                self._client = self._connect()
            return read_signals(self._client, self.settings)
        except (redis.RedisError, RedisConnectError, OSError):
            self._drop_client()
            raise

    def _drop_client(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()

    def _future(self) -> concurrent.futures.Future[Reading]:
        """The read under way, or a new one on a thread of its own. One at a time: a read
        stuck on a frozen server is waited on by the next scrapes, not piled up. The
        thread is a daemon, so a stop never waits for a read (its socket timeout ends it)."""
        with self._lock:
            if self._closed:
                raise RedisConnectError("the exporter is stopping")
            if self._running is None or self._running.done():
                future: concurrent.futures.Future[Reading] = concurrent.futures.Future()
                thread = threading.Thread(
                    target=self._run, args=(future,), name="sentinel-exporter-read", daemon=True
                )
                self._running = future
                thread.start()
            return self._running

    def _run(self, future: concurrent.futures.Future[Reading]) -> None:
        if not future.set_running_or_notify_cancel():
            return
        try:
            future.set_result(self._read())
        except BaseException as exc:  # handed to the scrape that waits on it
            future.set_exception(exc)

    def read(self) -> tuple[Reading | None, float]:
        """One bounded read: the reading (None on a timeout or an error) and its seconds."""
        started = time.monotonic()
        try:
            reading = self._future().result(timeout=self.timeout_s)
        except concurrent.futures.TimeoutError:
            reason, error = "timeout", f"no answer within {self.timeout_s:g}s"
        except (redis.RedisError, RedisConnectError, OSError) as exc:
            reason, error = "redis", scrub(str(exc) or type(exc).__name__)
        else:
            return reading, time.monotonic() - started
        with self._lock:
            self._errors[reason] += 1
        log.warning("exporter_read_failed", extra={"reason": reason, "error": error})
        return None, time.monotonic() - started

    def collect(self) -> Iterator[Metric]:
        reading, took_s = self.read()
        if reading is not None:
            yield from families(reading, self.settings)
        up = GaugeMetricFamily(
            "sentinel_exporter_redis_up",
            "1 when the last scrape read Redis within the timeout, else 0.",
            value=int(reading is not None),
        )
        took = GaugeMetricFamily(
            "sentinel_exporter_read_duration_seconds",
            "Seconds the last scrape spent reading Redis (at most the timeout).",
            value=round(took_s, 6),
        )
        errors = CounterMetricFamily(
            "sentinel_exporter_read_errors",
            "Scrapes that got nothing from Redis: timeout (slower than the exporter's "
            "timeout) or redis (unreachable, refused).",
            labels=["reason"],
        )
        with self._lock:
            for reason, count in self._errors.items():
                errors.add_metric([reason], count)
        yield from (up, took, errors)

    def close(self) -> None:
        """No new read starts; a read under way is not waited for (it ends with its socket
        timeout and closes nothing another thread uses)."""
        with self._lock:
            self._closed = True
            running = self._running
        if running is None or running.done():
            self._drop_client()
