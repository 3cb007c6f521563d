"""Publishing rows to a stream in pipelined batches, from wherever the rows are.

The same code runs in a benchmark loop, in a test, and inside a Spark executor's
``mapPartitions``. On an executor nothing live may cross the wire, so
:class:`PartitionPublisher` carries only plain data (URL, key names, guard config) and
opens its own connection; it returns one small :class:`PublishStats` per partition and
never sends rows back to the driver.

Rows become stream entries through the wire models themselves
(:meth:`Transaction.to_fields`, :meth:`Axiom.to_fields`): a row that would not parse at
the consumer fails here, on the producer, before it is sent.

A retried Spark task republishes its partition from the start. That is safe because
every entry carries its natural key and the workers' idempotency markers absorb repeats.
"""

from __future__ import annotations

import itertools
import logging
import os
import socket
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import redis
from redis.cluster import RedisCluster

from sentinel_platform.schemas import Axiom, Transaction
from sentinel_platform.streams.backpressure import (
    BackpressureConfig,
    BackpressureGuard,
    BackpressureTimeout,
    PublishInterrupted,
)
from sentinel_platform.streams.connection import RedisClient
from sentinel_platform.streams.keys import StreamKeys

log = logging.getLogger(__name__)

Kind = Literal["transactions", "axioms"]
TRANSACTION_COLUMNS = (
    "id",
    "merchant",
    "category",
    "currency",
    "amount",
    "message",
    "is_threat",
    "source",
    "timestamp",
)
AXIOM_COLUMNS = ("status", "metric_value", "anomaly_score", "source_id", "emitted_at", "domain")
STOP_KEY_TTL_S = 3600


def transaction_fields(row: Mapping[str, Any]) -> dict[str, str]:
    """The ``{"data": json}`` entry of one transaction row (validated by the wire model)."""
    return Transaction.model_validate(dict(row)).to_fields()


def axiom_fields(row: Mapping[str, Any]) -> dict[str, str]:
    """The flat string entry of one axiom row (validated by the wire model)."""
    return Axiom.model_validate(dict(row)).to_fields()


ROW_TO_FIELDS: dict[Kind, Callable[[Mapping[str, Any]], dict[str, str]]] = {
    "transactions": transaction_fields,
    "axioms": axiom_fields,
}
WIRE_COLUMNS: dict[Kind, tuple[str, ...]] = {
    "transactions": TRANSACTION_COLUMNS,
    "axioms": AXIOM_COLUMNS,
}


def id_order(stream_id: str) -> tuple[int, int]:
    """Sort key of a stream id (``ms-seq``)."""
    ms, _, seq = stream_id.partition("-")
    return int(ms), int(seq or 0)


def stop_key(keys: StreamKeys, run_id: str) -> str:
    """The key whose presence tells every executor of one run to stop (same slot as the stream)."""
    return f"{keys.paused}:run:{run_id}:stop"


@dataclass
class PublishStats:
    """What one publish did; small enough to return from every Spark partition."""

    rows: int = 0
    batches: int = 0
    first_id: str | None = None
    last_id: str | None = None
    duration_s: float = 0.0
    paused_s: float = 0.0
    slowed_s: float = 0.0
    soft_events: int = 0
    hard_events: int = 0
    max_lag: int = 0
    partitions: int = 1
    wall_s: float = field(default=0.0)
    #: ``host:pid`` of the processes that published, comma-separated: proof of where it ran.
    executors: str = ""

    @property
    def rows_per_s(self) -> float:
        elapsed = self.wall_s or self.duration_s
        return self.rows / elapsed if elapsed > 0 else 0.0

    def merge(self, other: PublishStats) -> PublishStats:
        """Combine partitions: sums, the lowest first id, the highest last id."""
        ids_first = [i for i in (self.first_id, other.first_id) if i]
        ids_last = [i for i in (self.last_id, other.last_id) if i]
        return PublishStats(
            rows=self.rows + other.rows,
            batches=self.batches + other.batches,
            first_id=min(ids_first, key=id_order) if ids_first else None,
            last_id=max(ids_last, key=id_order) if ids_last else None,
            duration_s=max(self.duration_s, other.duration_s),
            paused_s=self.paused_s + other.paused_s,
            slowed_s=self.slowed_s + other.slowed_s,
            soft_events=self.soft_events + other.soft_events,
            hard_events=self.hard_events + other.hard_events,
            max_lag=max(self.max_lag, other.max_lag),
            partitions=self.partitions + other.partitions,
            wall_s=max(self.wall_s, other.wall_s),
            executors=",".join(
                sorted({e for e in (*self.executors.split(","), *other.executors.split(",")) if e})
            ),
        )

    @classmethod
    def combine(cls, parts: Iterable[PublishStats]) -> PublishStats:
        total: PublishStats | None = None
        for part in parts:
            total = part if total is None else total.merge(part)
        return total or cls(partitions=0)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def publish_rows(
    client: RedisClient,
    keys: StreamKeys,
    entries: Iterable[Mapping[str, str]],
    batch_size: int,
    guard: BackpressureGuard | None = None,
    maxlen: int | None = None,
) -> PublishStats:
    """XADD ``entries`` (field maps) in pipelined batches, asking ``guard`` before each batch."""
    started = time.monotonic()
    stats = PublishStats()
    source = iter(entries)
    while True:
        budget = guard.wait_before_batch(batch_size) if guard else batch_size
        batch = list(itertools.islice(source, budget))
        if not batch:
            break
        pipe = client.pipeline(transaction=False)
        for fields in batch:
            pipe.xadd(keys.stream, dict(fields), maxlen=maxlen, approximate=True)
        ids = pipe.execute()
        if guard is not None:
            guard.record_sent(len(batch))
        stats.first_id = stats.first_id or ids[0]
        stats.last_id = ids[-1]
        stats.rows += len(batch)
        stats.batches += 1
    stats.duration_s = time.monotonic() - started
    if guard is not None:
        stats.paused_s = guard.stats.paused_s
        stats.slowed_s = guard.stats.slowed_s
        stats.soft_events = guard.stats.soft_events
        stats.hard_events = guard.stats.hard_events
        stats.max_lag = guard.stats.max_lag
    return stats


#: CLIENT LIST name of every executor-side publisher connection (``<prefix><stream>``).
PUBLISHER_CLIENT_PREFIX = "sentinel-publisher:"


def client_from_url(
    url: str, cluster: bool, socket_timeout_s: float = 30.0, name: str | None = None
) -> RedisClient:
    """A plain client for an executor (no embedded server, no version check: the driver did it).

    ``name`` shows in CLIENT LIST, so an operator (or a test) can see which executors are
    still publishing.
    """
    options: dict[str, Any] = {
        "decode_responses": True,
        "socket_timeout": socket_timeout_s,
        "socket_connect_timeout": 5,
    }
    if name:
        options["client_name"] = name
    if cluster or "+cluster://" in url:
        return RedisCluster.from_url(url.replace("+cluster://", "://", 1), **options)
    return redis.Redis.from_url(url, **options)


STATS_SCHEMA = (
    "rows long, batches long, first_id string, last_id string, duration_s double, "
    "paused_s double, slowed_s double, soft_events long, hard_events long, max_lag long, "
    "partitions long, wall_s double, executors string"
)


@dataclass(frozen=True)
class PartitionPublisher:
    """The function Spark runs on each partition: plain data in, one stats row out.

    Used with ``DataFrame.mapInArrow(publisher, STATS_SCHEMA)``, which works on classic
    Spark and on Spark Connect alike (``rdd.mapPartitions`` does not exist on Connect).
    """

    url: str
    cluster: bool
    keys: StreamKeys
    kind: Kind
    config: BackpressureConfig
    batch_size: int
    stop_key: str | None = None
    maxlen: int | None = None

    def publish(self, rows: Iterable[Mapping[str, Any]]) -> PublishStats:
        to_fields = ROW_TO_FIELDS[self.kind]
        name = f"{PUBLISHER_CLIENT_PREFIX}{self.keys.stream}"
        client = client_from_url(self.url, self.cluster, name=name)
        guard = BackpressureGuard(
            client,
            self.keys,
            self.config,
            should_stop=self._stop_requested(client),
            stop_key=self.stop_key,
        )
        started = time.monotonic()
        try:
            entries = (to_fields(row) for row in rows)
            stats = publish_rows(client, self.keys, entries, self.batch_size, guard, self.maxlen)
        except (BackpressureTimeout, PublishInterrupted):
            # Tell the sibling partitions (and any retry of this task) to stop too.
            if self.stop_key:
                client.set(self.stop_key, "1", ex=STOP_KEY_TTL_S)
            raise
        finally:
            client.close()
        stats.wall_s = time.monotonic() - started
        stats.executors = f"{socket.gethostname()}:{os.getpid()}"
        return stats

    def _stop_requested(self, client: RedisClient) -> Callable[[], bool]:
        # Polled by the guard between wait slices (<= 0.25 s), never on the nominal path.
        key = self.stop_key
        return (lambda: bool(client.exists(key))) if key else (lambda: False)

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        rows = (row for batch in batches for row in batch.to_pylist())
        stats = self.publish(rows)
        types = {"long": pa.int64(), "string": pa.string(), "double": pa.float64()}
        schema = pa.schema(
            [(name, types[kind]) for name, kind in (c.split() for c in STATS_SCHEMA.split(", "))]
        )
        yield pa.RecordBatch.from_pylist([stats.as_dict()], schema=schema)
