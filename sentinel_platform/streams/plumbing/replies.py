"""Typed views of the replies of a decoding Redis client.

Every client comes from :func:`sentinel_platform.streams.plumbing.connection.connect` with
``decode_responses=True``, so Redis answers with ``str``. redis-py's annotations say
``bytes | str`` (and optional parts in stream entries) because one set of annotations
covers decoding and raw clients alike. These helpers narrow a reply once, where it is
read, so the code behind them works with ``str``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias, TypedDict, TypeVar, cast

from redis.typing import EncodableT, StreamRangeResponse, XPendingRangeResponse

#: One stream entry as a decoding client returns it: (id, field -> value).
Entry: TypeAlias = tuple[str, dict[str, str]]


class PendingRow(TypedDict):
    """One row of XPENDING's extended form, as redis-py parses it."""

    message_id: str
    consumer: str
    time_since_delivered: int
    times_delivered: int


_Value = TypeVar("_Value", bound=EncodableT)


def text(value: bytes | str) -> str:
    """``value`` as text (UTF-8, should a raw client ever hand over bytes)."""
    return value.decode() if isinstance(value, bytes) else value


def optional_text(value: bytes | str | None) -> str | None:
    """:func:`text`, keeping ``None`` (a missing key, an empty reply)."""
    return None if value is None else text(value)


def text_dict(reply: Mapping[bytes | str, bytes | str] | None) -> dict[str, str]:
    """A hash (HGETALL) or an entry's fields as ``str -> str``; ``None`` as empty."""
    return {text(key): text(value) for key, value in (reply or {}).items()}


def entries(reply: StreamRangeResponse | None) -> list[Entry]:
    """XRANGE/XREVRANGE entries as (id, fields); ``None`` as no entries.

    A cast rather than a copy: ranges are read in pages of many entries and the client
    already decodes them; XRANGE never returns a deleted entry's missing fields.
    """
    return cast("list[Entry]", reply or [])


def pending_rows(reply: XPendingRangeResponse) -> list[PendingRow]:
    """XPENDING (extended form) rows, keyed as redis-py parses them (a cast, no copy)."""
    return cast("list[PendingRow]", reply)


def field_args(mapping: dict[str, _Value]) -> dict[EncodableT, EncodableT]:
    """``mapping`` typed as redis-py's XADD/HSET field argument.

    redis-py annotates the argument as a ``dict`` keyed and valued by any encodable type;
    ``dict`` is invariant, so a ``dict[str, str]`` does not fit without this widening
    (the same object, no copy).
    """
    return cast("dict[EncodableT, EncodableT]", mapping)
