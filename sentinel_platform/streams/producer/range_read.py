"""Reading a whole stream into Spark, split by id range across executors.

A stream id starts with a millisecond timestamp, so ``[first, last]`` can be cut into
contiguous, non-overlapping time slices without scanning anything first. Each Spark task
pages through its slice with XRANGE; the driver only learns the two end ids.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.replies import Entry, entries
from sentinel_platform.streams.producer.partition_publisher import client_from_url
from sentinel_platform.streams.producer.publish import id_order

PAGE = 10_000
MAX_SEQ = 2**64 - 1
ROWS_PER_SLICE = 50_000
ENTRY_SCHEMA = "stream_id string, fields map<string,string>"
RANGE_SCHEMA = "slice int, start string, end string"


def id_slices(client: RedisClient, stream: str, max_slices: int = 64) -> list[tuple[int, str, str]]:
    """``(slice, first_id, last_id)`` ranges covering the stream; empty for an empty stream."""
    first = entries(client.xrange(stream, "-", "+", count=1))
    last = entries(client.xrevrange(stream, "+", "-", count=1))
    if not first or not last:
        return []
    lo, hi = id_order(first[0][0])[0], id_order(last[0][0])[0]
    wanted = max(1, min(max_slices, int(client.xlen(stream)) // ROWS_PER_SLICE + 1))
    width = max(1, -(-(hi - lo + 1) // wanted))
    slices = []
    for index, start in enumerate(range(lo, hi + 1, width)):
        end = min(hi, start + width - 1)
        slices.append((index, f"{start}-0", f"{end}-{MAX_SEQ}"))
    return slices


def read_range(client: RedisClient, stream: str, start: str, end: str) -> Iterator[Entry]:
    """Every entry with ``start <= id <= end``, paged."""
    lower = start
    while True:
        page = entries(client.xrange(stream, lower, end, count=PAGE))
        yield from page
        if len(page) < PAGE:
            return
        lower = f"({page[-1][0]}"


@dataclass(frozen=True)
class RangeReader:
    """``mapInArrow`` function: id slices in, stream entries out (``ENTRY_SCHEMA``)."""

    url: str
    cluster: bool
    stream: str

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        schema = pa.schema(
            [("stream_id", pa.string()), ("fields", pa.map_(pa.string(), pa.string()))]
        )
        client = client_from_url(self.url, self.cluster)
        try:
            for batch in batches:
                for part in batch.to_pylist():
                    rows: list[dict[str, Any]] = []
                    for entry_id, fields in read_range(
                        client, self.stream, part["start"], part["end"]
                    ):
                        rows.append({"stream_id": entry_id, "fields": list(fields.items())})
                        if len(rows) >= PAGE:
                            yield pa.RecordBatch.from_pylist(rows, schema=schema)
                            rows = []
                    if rows:
                        yield pa.RecordBatch.from_pylist(rows, schema=schema)
        finally:
            client.close()
