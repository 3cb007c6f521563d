"""Raising a stream's shard count: drain, switch, with every key's marker where it goes.

A row's shard is ``crc32(key) % N``, so a new N sends some keys to other shards. Their
effects were recorded by the idempotency markers of their old shard, so a key published
again after the switch (a replay, a producer's retry) would find no marker on its new
shard and get a second effect. :func:`raise_shards` therefore switches only a drained
stream, and copies the marker of every key that moves (with its remaining TTL) to the
shard the key moves to, before it records the new count. The old shards keep their
tags, so their keys stay where they are; the new shards get tags of their own.

The procedure an operator follows (docs/scaling.md): pause the producers, let the
workers drain the stream, stop them, declare the new count in the stream's spec, run
``sentinel shards raise STREAM``, start the workers. Lowering the count is refused: the
shards it would drop hold the markers of their keys and may hold entries.
:func:`problems` is the pure check; the rest is I/O.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sentinel_platform.registry import StreamSpec
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.keys import StreamKeys, shard_keys
from sentinel_platform.streams.sharding.placement import choose_tags
from sentinel_platform.streams.sharding.record import masters_of, record_key, tags_on_record
from sentinel_platform.streams.sharding.routing import shard_of

#: Markers read and written per pipelined round trip (and asked of SCAN per call).
MARKER_PAGE = 1000


class ResizeRefused(RuntimeError):
    """The stream cannot be switched now; the message says why."""


@dataclass(frozen=True)
class ShardState:
    """What the switch checks of one old shard (or of the base key)."""

    stream: str
    lag: int
    live_workers: int


@dataclass(frozen=True)
class Raised:
    """What :func:`raise_shards` did."""

    before: int
    after: int
    tags: tuple[str, ...]
    markers_moved: int


def problems(recorded: int, declared: int, states: Sequence[ShardState]) -> list[str]:
    """Why a switch from ``recorded`` to ``declared`` shards may not happen now (none: it
    may): raise only, every shard drained, no worker serving any."""
    if declared < recorded:
        return [f"the shard count can only be raised ({recorded} recorded, {declared} declared)"]
    if declared == recorded:
        return [f"{recorded} shards are recorded already: nothing to raise"]
    found = [f"{s.stream}: lag {s.lag}, drain it first" for s in states if s.lag]
    found += [
        f"{s.stream}: {s.live_workers} live worker(s), stop them" for s in states if s.live_workers
    ]
    return found


def recorded_shards(client: Any, settings: Settings, spec: StreamSpec) -> tuple[str, ...]:
    """The tags recorded for ``spec``'s stream, whatever count it now declares."""
    tags = tags_on_record(client, spec.stream_key(settings))
    if tags is None:
        raise ResizeRefused(
            f"{spec.stream_key(settings)}: no shards recorded yet; start its workers instead"
        )
    return tags


def raise_shards(
    client: Any, settings: Settings, spec: StreamSpec, states: Sequence[ShardState]
) -> Raised:
    """Switch ``spec``'s stream from its recorded shard count to its declared one.

    ``states`` are the recorded shards' and the base key's (``sentinel shards raise``
    measures them as ``sentinel status`` does); :class:`ResizeRefused` when
    :func:`problems` finds any. The markers move first and the record changes last, so a
    switch cut short is run again from the start.
    """
    stream = spec.stream_key(settings)
    old = recorded_shards(client, settings, spec)
    found = problems(len(old), spec.shards, states)
    if found:
        raise ResizeRefused(f"{stream}: " + "; ".join(found))
    tags = old + choose_tags(stream, spec.shards, masters_of(client))[len(old) :]
    shards = [shard_keys(settings, spec, tag) for tag in tags]
    moved = sum(move_markers(client, shards[k], k, shards) for k in range(len(old)))
    client.set(record_key(stream), json.dumps({"count": spec.shards, "tags": list(tags)}))
    return Raised(len(old), spec.shards, tags, moved)


def move_markers(client: Any, old: StreamKeys, shard: int, shards: Sequence[StreamKeys]) -> int:
    """Copy each marker of shard ``shard`` whose key now routes elsewhere to that shard,
    with its remaining TTL; how many were copied. The old one stays until it expires.
    Markers are read and written a SCAN page at a time, in two pipelined round trips."""
    moved = 0
    prefix = old.marker_prefix
    names = client.scan_iter(match=_glob(prefix) + "*", count=MARKER_PAGE)
    while page := list(itertools.islice(names, MARKER_PAGE)):
        moving = [(name, shard_of(name[len(prefix) :], len(shards))) for name in page]
        moving = [(name, target) for name, target in moving if target != shard]
        reads = client.pipeline(transaction=False)
        for name, _target in moving:
            reads.get(name)
            reads.pttl(name)
        replies = reads.execute()
        writes = client.pipeline(transaction=False)
        for (name, target), value, ttl_ms in zip(moving, replies[::2], replies[1::2], strict=True):
            if value is None:
                continue  # expired meanwhile
            key = name[len(prefix) :]
            writes.set(
                shards[target].marker(key), value, px=ttl_ms if ttl_ms > 0 else None, nx=True
            )
            moved += 1
        writes.execute()
    return moved


def _glob(text: str) -> str:
    """``text`` as a literal in a ``SCAN MATCH`` pattern."""
    return "".join(f"\\{c}" if c in "*?[]\\" else c for c in text)
