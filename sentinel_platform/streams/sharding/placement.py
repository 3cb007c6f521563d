"""Where the shards of a stream live: one hash tag per shard, chosen to spread the masters.

Every key of a shard carries the shard's hash tag (``{<stream>~<k>}``), so the shard's
keys share one slot and its scripts stay single-slot. Which master serves that slot is
the cluster's business, so a tag chosen at random leaves the spread to chance: three
random tags on three masters share a master 21 times in 27 (78%). :func:`choose_tags`
instead assigns shard ``k`` to master ``k mod M`` (the masters in slot order) and tries
salts (``{<stream>~<k>.<salt>}``) until the tag's slot is one that master serves.

* Fewer masters than shards: the shards go round the masters, so no master serves two
  shards more than another does.
* More masters than shards: N of them serve one shard each; the others serve none.
* After a resharding the tags stay what they were (they are recorded once, and every
  process reads them): a shard's keys move with its slot, so nothing is lost, and
  :func:`placement` tells where each shard lives now. Spreading them again is a change
  of tags, done like a change of N.

The choice is deterministic: the same cluster layout gives the same tags.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from redis.crc import key_slot

from sentinel_platform.streams.sharding.routing import check_shard_count

#: A master that serves only one slot of 16,384 is found within this many salts with a
#: chance of over 99.99%; a tag is a few bytes, so the search stays well under a second.
MAX_SALT = 200_000


@dataclass(frozen=True)
class Master:
    """One master of the cluster: its address and the slot ranges it serves (inclusive)."""

    address: str
    ranges: tuple[tuple[int, int], ...]

    def serves(self, slot: int) -> bool:
        return any(low <= slot <= high for low, high in self.ranges)


def masters_from_shards(shards: Iterable[Mapping[str, Any]]) -> list[Master]:
    """The masters of a ``CLUSTER SHARDS`` reply (as redis-py parses it) that serve slots,
    in the order of their first slot. Slots come as pairs or as one flat list of bounds."""
    masters = []
    for shard in shards:
        ranges = _ranges(shard.get("slots") or [])
        primary = next(
            (n for n in shard.get("nodes") or [] if _text(n.get("role")) == "master"), None
        )
        if ranges and primary is not None:
            masters.append(Master(f"{_text(primary.get('ip'))}:{primary.get('port')}", ranges))
    return sorted(masters, key=lambda master: master.ranges[0][0])


def _ranges(slots: Sequence[Any]) -> tuple[tuple[int, int], ...]:
    bounds = [
        int(b) for pair in slots for b in (pair if isinstance(pair, list | tuple) else [pair])
    ]
    return tuple(sorted(zip(bounds[::2], bounds[1::2], strict=True)))


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def shard_tag(stream: str, shard: int, salt: int = 0) -> str:
    """The hash tag of ``stream``'s shard ``shard``: ``{<stream>~<k>}``, or
    ``{<stream>~<k>.<salt>}`` when a salt moved it to another slot."""
    return f"{{{stream}~{shard}}}" if salt == 0 else f"{{{stream}~{shard}.{salt}}}"


def tag_slot(tag: str) -> int:
    """The hash slot of every key carrying ``tag``."""
    return int(key_slot(tag.encode()))


def choose_tags(stream: str, count: int, masters: Sequence[Master]) -> tuple[str, ...]:
    """One hash tag per shard of ``stream``, shard ``k`` on ``masters[k % len(masters)]``."""
    check_shard_count(count)
    if not masters:
        raise ValueError("no master of the cluster serves any slot")
    return tuple(_tag_on(stream, k, masters[k % len(masters)]) for k in range(count))


def _tag_on(stream: str, shard: int, master: Master) -> str:
    for salt in range(MAX_SALT):
        tag = shard_tag(stream, shard, salt)
        if master.serves(tag_slot(tag)):
            return tag
    raise ValueError(f"no tag of shard {shard} of {stream} hashes to a slot of {master.address}")


def placement(tags: Sequence[str], masters: Sequence[Master]) -> dict[str, list[int]]:
    """The shards each master serves now (an empty list for a master serving none), and
    under ``""`` the shards whose slot no master serves (a cluster mid-failover)."""
    found: dict[str, list[int]] = {master.address: [] for master in masters}
    for shard, tag in enumerate(tags):
        slot = tag_slot(tag)
        home = next((m.address for m in masters if m.serves(slot)), "")
        found.setdefault(home, []).append(shard)
    return found
