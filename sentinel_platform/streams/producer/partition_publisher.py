"""The function Spark runs on each partition of a publish: plain data in, one stats row out.

On an executor nothing live may cross the wire, so :class:`PartitionPublisher` carries only
plain data (URL, key names, guard config, a sharded stream's shard keys) and opens its own
connection (:func:`client_from_url`); it returns one small
:class:`~sentinel_platform.streams.producer.publish.PublishStats` per partition and never
sends rows back to the driver.
"""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import redis
from redis.cluster import RedisCluster

from sentinel_platform.registry import StreamSpec
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform.streams.plumbing.undecodable import ENCODING_ERRORS
from sentinel_platform.streams.producer.backpressure import (
    BackpressureGuard,
    BackpressureTimeout,
    PublishInterrupted,
)
from sentinel_platform.streams.producer.pacing_limits import BackpressureConfig
from sentinel_platform.streams.producer.packed_xadd import batch_sender
from sentinel_platform.streams.producer.publish import (
    EXACT_COLUMN,
    SAMPLE_ROWS,
    STOP_KEY_TTL_S,
    PublishStats,
    frame_entries,
    publish_batches,
    sample_checked,
)
from sentinel_platform.streams.producer.routed_publish import (
    SHARD_COLUMN,
    Routed,
    ShardTally,
    routed,
    routed_sender,
)

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
        "encoding_errors": ENCODING_ERRORS,  # foreign bytes never fail a read-back
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
    "partitions long, wall_s double, executors string, shard_rows string"
)


@dataclass(frozen=True)
class PartitionPublisher:
    """The function Spark runs on each partition: plain data in, one stats row out.

    Used as ``wire_frame(df, spec).mapInArrow(publisher, STATS_SCHEMA)``, which works on
    classic Spark and on Spark Connect alike (``rdd.mapPartitions`` does not exist on
    Connect). Its input batches hold the ``spec.wire_fields`` strings and
    :data:`EXACT_COLUMN`, and for a sharded stream ``routed_publish.SHARD_COLUMN``.

    With ``shards`` (a sharded stream's shards, ``sharding.shards.keys_of_shards``) every
    entry goes to its natural key's shard and the guard paces on the whole stream;
    ``keys`` stay the stream's own, where its flags, stop keys and lag live. For the batch
    lane ``keys`` and ``shards`` name the batch lane's streams (``lanes.lane_keys``) and
    nothing is paced (``paced`` false).
    """

    url: str
    cluster: bool
    keys: StreamKeys
    spec: StreamSpec
    config: BackpressureConfig
    batch_size: int
    stop_key: str | None = None
    maxlen: int | None = None
    sample_rows: int = SAMPLE_ROWS
    #: extra fields every entry carries besides its wire fields (the demo's mark)
    marker: tuple[tuple[str, str], ...] = ()
    shards: tuple[StreamKeys, ...] = ()
    #: paced by the stream's backpressure guard; False for the batch lane, whose
    #: messages wait for a provider's batch and are never the live stream's lag
    paced: bool = True

    def publish(self, rows: Iterable[Mapping[str, Any]]) -> PublishStats:
        """Publish rows of ``spec.columns`` values, each through its wire model."""
        return self.publish_entries(self.spec.row_to_fields(row) for row in rows)

    def publish_entries(self, entries: Iterable[Mapping[str, str]]) -> PublishStats:
        """Publish ready field maps in batches, the guard asked before each batch; to a
        sharded stream each to the shard of its natural key."""
        if self.shards:
            pairs = ((fields, None) for fields in entries)
            return self._publish(routed(self.spec, pairs, len(self.shards)))
        return self._publish(entries)

    def _publish(self, entries: Iterable[Any]) -> PublishStats:
        name = f"{PUBLISHER_CLIENT_PREFIX}{self.keys.stream}"
        client = client_from_url(self.url, self.cluster, name=name)
        guard = (
            BackpressureGuard(
                client,
                self.keys,
                self.config,
                should_stop=self._stop_requested(client),
                stop_key=self.stop_key,
                shards=self.shards,
            )
            if self.paced
            else None
        )
        tally = ShardTally(len(self.shards))
        send = (
            tally.counting(routed_sender(client, self.shards, self.maxlen))
            if self.shards
            else batch_sender(client, self.keys, self.maxlen)
        )
        started = time.monotonic()
        try:
            stats = publish_batches(send, entries, self.batch_size, guard)
        except (BackpressureTimeout, PublishInterrupted) as exc:
            # Tell the sibling partitions (and any retry of this task) to stop too, and
            # why: the first reason set is kept, so a sibling's error names the cause.
            if self.stop_key:
                reason = f"{type(exc).__name__}: {exc}"
                client.set(self.stop_key, reason, ex=STOP_KEY_TTL_S, nx=True)
            raise
        finally:
            client.close()
        stats.wall_s = time.monotonic() - started
        stats.executors = f"{socket.gethostname()}:{os.getpid()}"
        if self.shards:  # ids of several streams: no first or last of the stream
            stats.first_id = stats.last_id = None
            stats.shard_rows = tally.text()
        return stats

    def _stop_requested(self, client: RedisClient) -> Callable[[], bool]:
        # Polled by the guard between wait slices (<= 0.25 s), never on the nominal path.
        key = self.stop_key
        return (lambda: bool(client.exists(key))) if key else (lambda: False)

    def entries(self, batches: Iterable[Any]) -> Iterator[Mapping[str, str]]:
        """The entries of a partition's Arrow batches of a wire frame, sample-checked."""
        names = self.spec.wire_fields

        def unchecked() -> Iterator[dict[str, str]]:
            for batch in batches:
                columns = [batch.column(name).to_pylist() for name in names]
                exact = batch.column(EXACT_COLUMN).to_pylist()
                yield from frame_entries(self.spec, columns, exact)

        checked = sample_checked(self.spec, unchecked(), self.sample_rows)
        extra = dict(self.marker)
        return ({**fields, **extra} for fields in checked) if extra else checked

    def routed_entries(self, batches: Iterable[Any]) -> Iterator[Routed]:
        """A sharded stream's entries with their shard (the frame's, or their key's)."""
        names, extra = self.spec.wire_fields, dict(self.marker)

        def pairs() -> Iterator[tuple[Mapping[str, str], int | None]]:
            for batch in batches:
                columns = [batch.column(name).to_pylist() for name in names]
                exact = batch.column(EXACT_COLUMN).to_pylist()
                entries = frame_entries(self.spec, columns, exact)
                if extra:
                    entries = ({**fields, **extra} for fields in entries)
                yield from zip(entries, batch.column(SHARD_COLUMN).to_pylist(), strict=True)

        return routed(self.spec, pairs(), len(self.shards), self.sample_rows)

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        if self.shards:
            yield stats_batch(self._publish(self.routed_entries(batches)))
        else:
            yield stats_batch(self._publish(self.entries(batches)))


def stats_batch(stats: PublishStats) -> Any:
    """One partition's stats as the single-row Arrow batch of :data:`STATS_SCHEMA`."""
    import pyarrow as pa

    types = {"long": pa.int64(), "string": pa.string(), "double": pa.float64()}
    schema = pa.schema(
        [(name, types[kind]) for name, kind in (c.split() for c in STATS_SCHEMA.split(", "))]
    )
    return pa.RecordBatch.from_pylist([stats.as_dict()], schema=schema)
