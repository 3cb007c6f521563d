"""The batch lane's stream: reading its entries, taking over a dead holder's, putting
one back. Redis I/O only; what the entries come to is decided elsewhere.

* :func:`read_new`: the group's undelivered entries (``XREADGROUP >``), blocking at
  most the time given;
* :func:`take_over`: every entry pending in the group (a dead holder's, our own from
  before a restart) claimed to this holder (``XAUTOCLAIM`` from ``0-0``, idle or not:
  one worker holds the lane) except those of a batch the ledger knows, which are
  decided from that batch's results and never sent again;
* :func:`fetch`: entries by id (``XRANGE``), for a batch resumed by a taker;
* :func:`requeue`: an entry back to the lane as a fresh one, the old one acknowledged,
  atomically and only while it is still pending (a second requeue adds nothing).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any, cast

from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys

#: Entries claimed per ``XAUTOCLAIM`` call, and the most calls of one take-over.
CLAIM_COUNT = 1000
MAX_CLAIM_CALLS = 1000

_REQUEUE_LUA = """
if #redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[2], ARGV[2], 1) == 0 then return 0 end
redis.call('XADD', KEYS[1], '*', unpack(ARGV, 3))
redis.call('XACK', KEYS[1], ARGV[1], ARGV[2])
return 1
"""

Entries = list[tuple[str, dict[str, str]]]


def read_new(
    client: RedisClient, keys: StreamKeys, consumer: str, count: int, block_ms: int
) -> Entries:
    """Up to ``count`` undelivered entries, waiting at most ``block_ms`` for the first."""
    reply = cast(
        list[Any],
        client.xreadgroup(
            keys.group, consumer, {keys.stream: ">"}, count=count, block=max(1, block_ms)
        ),
    )
    return [(i, dict(f)) for _, found in reply or [] for i, f in found if f is not None]


def take_over(
    client: RedisClient, keys: StreamKeys, consumer: str, known: Collection[str]
) -> Entries:
    """Every pending entry of the group, claimed to ``consumer``, but those in ``known``
    (the ledger's batches' messages); entries deleted meanwhile are left out."""
    taken: Entries = []
    start = "0-0"
    for _ in range(MAX_CLAIM_CALLS):
        reply: list[Any] = client.xautoclaim(
            keys.stream, keys.group, consumer, 0, start, count=CLAIM_COUNT
        )
        start, claimed = str(reply[0]), reply[1]
        taken.extend((i, dict(f)) for i, f in claimed if f is not None and i not in known)
        if start == "0-0":
            break
    return taken


def fetch(client: RedisClient, keys: StreamKeys, ids: Iterable[str]) -> dict[str, dict[str, str]]:
    """The entries of ``ids`` still in the stream, by id."""
    wanted = list(ids)
    pipe = client.pipeline(transaction=False)
    for entry_id in wanted:
        pipe.xrange(keys.stream, entry_id, entry_id, count=1)
    found: dict[str, dict[str, str]] = {}
    for entry_id, reply in zip(wanted, pipe.execute(), strict=True):
        if reply:
            found[entry_id] = dict(reply[0][1])
    return found


class Requeuer:
    """Puts entries of ``keys``' lane back as fresh entries (see the module)."""

    def __init__(self, client: RedisClient, keys: StreamKeys) -> None:
        self.keys = keys
        self._script = client.register_script(_REQUEUE_LUA)

    def requeue(self, entry_id: str, fields: dict[str, str]) -> bool:
        """True when the entry went back (False: no longer pending, settled elsewhere)."""
        flat = [part for pair in fields.items() for part in pair]
        args = [self.keys.group, entry_id, *flat]
        return bool(self._script(keys=[self.keys.stream], args=args))
