"""Publishing rows to a stream in pipelined batches, from wherever the rows are.

The same code runs in a benchmark loop, in a test, and inside a Spark executor's
``mapInArrow`` (``partition_publisher.PartitionPublisher``, which returns one small
:class:`PublishStats` per partition).

On the executors the field strings arrive ready-made: Spark builds them in the JVM
(``sentinel_platform.resources.wire_columns``) and marks the few rows whose bytes it
cannot guarantee (:data:`EXACT_COLUMN` false); only those go through the stream's wire
model here (:attr:`StreamSpec.wire_model`), which re-serialises them exactly as its
``to_fields`` would, or rejects them. The first ``sample_rows``
entries of each partition are parsed as the workers parse them, a cheap canary for the
whole path; building a model for every row would cost more than sending it.

Outside Spark, :meth:`StreamSpec.row_to_fields` turns a row into its entry through the
wire model itself: the reference the Spark columns are tested against.

A retried Spark task republishes its partition from the start. That is safe because
every entry carries its natural key and the workers' idempotency markers absorb repeats.
"""

from __future__ import annotations

import itertools
import logging
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from sentinel_platform.registry import AXIOMS, TRANSACTIONS, StreamSpec
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform.streams.producer.backpressure import (
    BackpressureGuard,
)
from sentinel_platform.streams.producer.packed_xadd import batch_sender

log = logging.getLogger(__name__)

STOP_KEY_TTL_S = 3600
#: Boolean column of a wire frame: false where the row must go through its wire model.
EXACT_COLUMN = "wire_exact"
#: Entries of each partition parsed by the wire model before they are sent.
SAMPLE_ROWS = 64
#: The built-in streams' row columns (read from their specs; kept for readers of rows).
TRANSACTION_COLUMNS = TRANSACTIONS.columns
AXIOM_COLUMNS = AXIOMS.columns


def transaction_fields(row: Mapping[str, Any]) -> dict[str, str]:
    """The ``{"data": json}`` entry of one transaction row (validated by the wire model)."""
    return TRANSACTIONS.row_to_fields(row)


def axiom_fields(row: Mapping[str, Any]) -> dict[str, str]:
    """The flat string entry of one axiom row (validated by the wire model)."""
    return AXIOMS.row_to_fields(row)


def frame_entries(
    spec: StreamSpec, columns: Sequence[Sequence[str | None]], exact: Sequence[bool | None]
) -> Iterator[dict[str, str]]:
    """Entries of one wire-frame batch, given column-wise (``spec.wire_fields`` order).

    Null values are left out, as the models leave out ``None``; a row not marked exact is
    re-serialised by its wire model.
    """
    names = spec.wire_fields
    if len(names) == 1:  # one JSON payload field: skip the per-row zip of columns
        (name,), (column,) = names, columns
        for value, ok in zip(column, exact, strict=True):
            single = {name: value} if value is not None else {}
            yield single if ok else spec.reserialised(single)
        return
    for values, ok in zip(zip(*columns, strict=True), exact, strict=True):
        fields = {n: v for n, v in zip(names, values, strict=True) if v is not None}
        yield fields if ok else spec.reserialised(fields)


def sample_checked(
    spec: StreamSpec, entries: Iterable[Mapping[str, str]], rows: int = SAMPLE_ROWS
) -> Iterator[Mapping[str, str]]:
    """``entries`` unchanged, the first ``rows`` of them parsed as the workers parse them."""
    source = iter(entries)
    parse = spec.wire_model.from_fields
    for fields in itertools.islice(source, rows):
        parse(fields)
        yield fields
    yield from source


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
    #: Rows per shard of a sharded stream, comma-separated (``"12,9,14"``); empty otherwise.
    shard_rows: str = ""

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
            shard_rows=_summed_counts(self.shard_rows, other.shard_rows),
        )

    @property
    def rows_per_shard(self) -> list[int]:
        """:attr:`shard_rows` as numbers (empty for a stream of one shard)."""
        return [int(rows) for rows in self.shard_rows.split(",")] if self.shard_rows else []

    @classmethod
    def combine(cls, parts: Iterable[PublishStats]) -> PublishStats:
        total: PublishStats | None = None
        for part in parts:
            total = part if total is None else total.merge(part)
        return total or cls(partitions=0)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _summed_counts(first: str, second: str) -> str:
    """Two ``shard_rows`` texts added shard by shard (either may be empty)."""
    if not first or not second:
        return first or second
    pairs = zip(first.split(","), second.split(","), strict=True)
    return ",".join(str(int(a) + int(b)) for a, b in pairs)


def publish_rows(
    client: RedisClient,
    keys: StreamKeys,
    entries: Iterable[Mapping[str, str]],
    batch_size: int,
    guard: BackpressureGuard | None = None,
    maxlen: int | None = None,
) -> PublishStats:
    """XADD ``entries`` (field maps) in pipelined batches, asking ``guard`` before each batch.

    Each batch is one write and one read of its replies
    (:func:`~sentinel_platform.streams.producer.packed_xadd.send_packed`; a pipeline on a
    cluster client). A batch that fails raises: the entries of earlier batches stay.
    """
    return publish_batches(batch_sender(client, keys, maxlen), entries, batch_size, guard)


def publish_batches(
    send: Callable[[list[Any]], list[Any]],
    entries: Iterable[Any],
    batch_size: int,
    guard: BackpressureGuard | None = None,
) -> PublishStats:
    """:func:`publish_rows` with the batch sender given: ``send`` writes a batch of
    ``entries`` (field maps, or routed ones: ``routed_publish.Routed``) and returns their ids."""
    started = time.monotonic()
    stats = PublishStats()
    source = iter(entries)
    while True:
        budget = guard.wait_before_batch(batch_size) if guard else batch_size
        batch = list(itertools.islice(source, budget))
        if not batch:
            break
        ids = send(batch)
        if guard is not None:
            guard.record_sent(len(batch))
        stats.first_id = stats.first_id or _text(ids[0])
        stats.last_id = _text(ids[-1])
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


def _text(stream_id: str | bytes) -> str:
    return stream_id.decode() if isinstance(stream_id, bytes) else stream_id
