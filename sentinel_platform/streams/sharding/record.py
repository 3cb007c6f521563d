"""The shards of a stream, recorded once so that every process uses the same tags.

:func:`~sentinel_platform.streams.sharding.placement.choose_tags` depends on the cluster's
layout, which changes (a resharding, a master added): two processes that each chose for
themselves could name different keys for one shard. So the first process to need the
tags chooses them and records them in one Redis key, ``sentinel:shards:<stream>``, with
``SET NX``; every process, that one included, then uses what the key holds. After a
resharding the names stay, and the keys move with their slots.

The record is JSON, ``{"count": N, "tags": [...]}``. A process asking for another count
than the recorded one is refused (:class:`ShardCountChanged`): a change of N renames the
shards a row routes to, so it is an operator's procedure, never a side effect of a
start-up. :func:`tags_from_record` is the pure check; :func:`recorded_tags` the I/O.
"""

from __future__ import annotations

import json
import re
from typing import Any

from redis.cluster import RedisCluster

from sentinel_platform.streams.sharding.placement import (
    Master,
    choose_tags,
    masters_from_shards,
    shard_tag,
)
from sentinel_platform.streams.sharding.routing import check_shard_count

#: Every slot: the one "master" of a single server, where the spread means nothing.
ALL_SLOTS = ((0, 16383),)


class ShardCountChanged(ValueError):
    """The stream's recorded shard count differs from the one asked for."""


def record_key(stream: str) -> str:
    """The key holding the record of ``stream``'s shards."""
    return f"sentinel:shards:{stream}"


def tags_from_record(raw: str | bytes, stream: str, count: int) -> tuple[str, ...]:
    """The tags a record holds, checked: ``count`` of them, each a tag of its own shard
    of ``stream``. Raises :class:`ShardCountChanged` for another count, ``ValueError``
    for a record that is not one."""
    key = record_key(stream)
    try:
        record = json.loads(raw)
        recorded, tags = int(record["count"]), tuple(str(t) for t in record["tags"])
    except (ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"{key} is not a record of shards: {exc}") from None
    if recorded != count:
        raise ShardCountChanged(
            f"stream {stream!r} is recorded with {recorded} shard(s) in {key}, "
            f"and {count} were asked for: a change of the shard count is a procedure "
            "(see the scaling guide), never done at start-up"
        )
    if len(tags) != count or any(not _is_tag_of(tag, stream, k) for k, tag in enumerate(tags)):
        raise ValueError(f"{key} holds tags {list(tags)} that are not {count} shards of {stream}")
    return tags


def _is_tag_of(tag: str, stream: str, shard: int) -> bool:
    """``tag`` is :func:`shard_tag` of ``stream``'s ``shard``, with or without a salt."""
    plain = shard_tag(stream, shard)
    return re.fullmatch(re.escape(plain[:-1]) + r"(\.[0-9]+)?\}", tag) is not None


def recorded_tags(client: Any, stream: str, count: int) -> tuple[str, ...]:
    """The tags of ``stream``'s ``count`` shards: the recorded ones, or, if none are
    recorded yet, ones chosen from the cluster's layout and recorded first (the first
    writer wins; every caller returns what the key holds). ``client`` is a redis-py
    ``Redis`` or ``RedisCluster`` decoding responses."""
    check_shard_count(count)
    key = record_key(stream)
    raw = client.get(key)
    if raw is None:
        tags = choose_tags(stream, count, masters_of(client))
        client.set(key, json.dumps({"count": count, "tags": list(tags)}), nx=True)
        raw = client.get(key)
    return tags_from_record(raw, stream, count)


def tags_on_record(client: Any, stream: str) -> tuple[str, ...] | None:
    """The tags ``stream``'s record holds, at the count it records, or None while none is
    recorded: for readers (``sentinel status``, ``sentinel dlq``, the sensors), which
    neither choose tags nor refuse a count a spec declares before its switch."""
    raw = client.get(record_key(stream))
    if raw is None:
        return None
    try:
        count = int(json.loads(raw)["count"])
    except (ValueError, KeyError, TypeError):
        count = 0  # tags_from_record says what is wrong with it
    return tags_from_record(raw, stream, count)


def masters_of(client: Any) -> list[Master]:
    """The cluster's masters in slot order; a single server serves every slot."""
    if isinstance(client, RedisCluster):
        return masters_from_shards(client.cluster_shards())
    return [Master("single", ALL_SLOTS)]
