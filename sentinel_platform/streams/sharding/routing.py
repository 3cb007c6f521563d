"""Which shard a row goes to: the CRC-32 of its natural key, modulo the shard count.

Routing by the natural key (a transaction's id, an axiom's id) sends every copy of one
key to one shard, so the shard's idempotency markers and dedupe stay exact, and keeps the
order of one key's entries. CRC-32 because Spark has it built in: :func:`shard_column` is
computed in the JVM, row by row, without a Python UDF, and gives the very number
:func:`shard_of` gives in a worker or a tool (CRC-32 of the key's UTF-8 bytes).
"""

from __future__ import annotations

import zlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import Column


def check_shard_count(count: int) -> None:
    """Refuse a shard count below one, naming it (every decision of the group needs one)."""
    if count < 1:
        raise ValueError(f"a stream has at least one shard, got {count}")


def shard_of(natural_key: str, count: int) -> int:
    """The shard (``0 .. count-1``) of ``natural_key`` in a stream of ``count`` shards."""
    check_shard_count(count)
    return zlib.crc32(natural_key.encode("utf-8")) % count


def shard_column(natural_key: Column, count: int) -> Column:
    """The same as :func:`shard_of`, as a Spark column over a string column of keys."""
    check_shard_count(count)
    # Imported here, not above: the workers import this module and never load Spark.
    from pyspark.sql import functions as F

    return F.pmod(F.crc32(natural_key.cast("string")), F.lit(count)).cast("int")
