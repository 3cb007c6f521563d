"""Publishing a sharded stream: every entry to the shard of its natural key.

Routing by the natural key sends every copy of one key to one shard, so that shard's
idempotency markers give it one effect, and keeps one key's entries in their order. The
shard of a row the JVM vouched for arrives with it (``wire_shard``: the CRC-32 of the
key, computed by Spark, ``resources.wire_columns``); a row it could not vouch for (not
exact, or a stream that declares no ``spark_key``) arrives without one and is routed here
by its wire model's own ``natural_key`` (:func:`routed`), the very number the workers'
forwarder and a raise of the shard count compute.

One batch is one write to every shard it touches: on a plain server the XADDs of all its
shards are hand-encoded and sent at once; on a cluster one pipeline, which redis-py splits
by node, so an executor talks to each master its rows go to in parallel.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import redis

from sentinel_platform.registry import StreamSpec
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform.streams.producer.packed_xadd import XaddEncoder, send_packed
from sentinel_platform.streams.sharding.routing import shard_of

#: Integer column of a sharded stream's wire frame: the row's shard, null where Spark could
#: not vouch for the row's key (the executor then routes it by its model's key).
SHARD_COLUMN = "wire_shard"
#: One entry on its way: its shard (``0 .. N-1``) and its fields.
Routed = tuple[int, Mapping[str, str]]
#: How a batch of routed entries is sent; the stream ids come back in the batch's order.
RoutedSender = Callable[[list[Routed]], list[Any]]


def routed(
    spec: StreamSpec,
    pairs: Iterable[tuple[Mapping[str, str], int | None]],
    count: int,
    sample_rows: int = 0,
) -> Iterator[Routed]:
    """Each ``(fields, shard)`` as a :data:`Routed` entry: the shard given, or the one of the
    entry's natural key where none is (which parses the entry, as the workers will). The
    first ``sample_rows`` entries are parsed either way: the partition's canary
    (``publish.sample_checked``)."""
    parse = spec.wire_model.from_fields
    for seen, (fields, shard) in enumerate(pairs):
        if shard is None:
            shard = shard_of(parse(fields).natural_key, count)
        elif seen < sample_rows:
            parse(fields)
        yield shard, fields


def routed_sender(
    client: RedisClient, shards: Sequence[StreamKeys], maxlen: int | None
) -> RoutedSender:
    """Sends a batch to the shards its entries name: hand-encoded XADDs in one write on a
    plain client, one pipeline over the shards' masters on a cluster."""
    if isinstance(client, redis.Redis):
        encoders = [XaddEncoder(keys.stream, maxlen) for keys in shards]
        plain = client
        return lambda batch: send_packed(plain, [encoders[k].encode(f) for k, f in batch])
    streams = [keys.stream for keys in shards]

    def pipeline(batch: list[Routed]) -> list[Any]:
        pipe = client.pipeline(transaction=False)
        for shard, fields in batch:
            entry: dict[Any, Any] = dict(fields)
            pipe.xadd(streams[shard], entry, maxlen=maxlen, approximate=True)
        ids: list[Any] = pipe.execute()
        return ids

    return pipeline


class ShardTally:
    """Rows sent to each shard, for the publish's metadata (``PublishStats.shard_rows``)."""

    def __init__(self, count: int) -> None:
        self.rows = [0] * count

    def counting(self, send: RoutedSender) -> RoutedSender:
        """``send``, counting each batch's rows per shard once it was sent."""

        def counted(batch: list[Routed]) -> list[Any]:
            ids = send(batch)
            for shard, _fields in batch:
                self.rows[shard] += 1
            return ids

        return counted

    def text(self) -> str:
        """The counts as ``PublishStats.shard_rows`` carries them (``"12,9,14"``)."""
        return ",".join(str(rows) for rows in self.rows)
