"""A sharded stream's base key, served: entries added there move to their key's shard,
and the stream's one lag is written at today's name.

Producers of a sharded stream should write each row to the shard of its natural key
(``sharding.routing``). One that writes the base key (a Sentinel-L7 producer, an
operator's tool, the platform's own publish step until it routes) is served all the
same: every worker of the stream also reads the base key, in the stream's group, and
forwards each entry to the shard of its natural key, then acknowledges and deletes it
there. That is two writes in two slots (the shard's ``XADD``; the base's ``XACK`` and
``XDEL``), so a worker that dies between them leaves the entry pending on the base key,
and another worker forwards it again once it has been idle for :data:`FORWARD_IDLE_MS`
(``XAUTOCLAIM``). The shard then holds two copies of one key, which meet there (same
key, same shard) and get one effect from the shard's markers: routed, never applied
twice. An entry whose natural key cannot be read is dead-lettered here, with its reason
and whole payload, atomically with its acknowledgement and once per entry id (the
consumer's own dead-letter script, ``settling.dead_letter``), so a forward repeated after
a crash never dead-letters it twice.

Each pass also writes the stream's lag at its logical lag key (``keys_for``'s, the name
an unsharded stream has): the base key's backlog plus every shard's. So the lag sensor,
``sentinel status`` and a producer's published-lag stop see one stream.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import redis

from sentinel_platform.logs import BoundLogger
from sentinel_platform.schemas import describe_error
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.lag import measure_lag, queue_lag_key
from sentinel_platform.streams.backlog.peaks import queue_record_lag
from sentinel_platform.streams.consumer.group import ensure_group
from sentinel_platform.streams.consumer.settling.dead_letter import (
    DEAD_LETTER,
    build_dead_letter,
    queue_dead_letter,
)
from sentinel_platform.streams.plumbing.backoff import Backoff
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform.streams.plumbing.scripts import with_scripts
from sentinel_platform.streams.sharding.routing import shard_of

log = logging.getLogger(__name__)

#: A base entry pending this long on a worker is forwarded by another: its forwarder is
#: dead or stuck (a live one forwards in milliseconds), and a copy is harmless.
FORWARD_IDLE_MS = 10_000
#: Entries moved per pass, and the longest a pass blocks for new ones (a stop waits no
#: longer than that).
FORWARD_COUNT = 500
FORWARD_BLOCK_MS = 200
#: How often the stream's one lag is written.
LAG_INTERVAL_S = 1.0

#: The natural key of an entry's fields; raises when the entry is not a valid message.
KeyOf = Callable[[Mapping[str, str]], str]


class Forwarder:
    """Serves a sharded stream's base key for one worker (``consumer``), until ``stop``."""

    def __init__(
        self,
        client: RedisClient,
        base: StreamKeys,
        shards: Sequence[StreamKeys],
        key_of: KeyOf,
        consumer: str,
        settings: Settings,
        stop: threading.Event,
        idle_ms: int = FORWARD_IDLE_MS,
    ) -> None:
        self.client, self.base, self.shards = client, base, shards
        self.key_of, self.consumer = key_of, consumer
        self.settings, self.stop, self.idle_ms = settings, stop, idle_ms
        fields = {"stream": base.stream, "group": base.group, "consumer": consumer}
        self.log = BoundLogger(log, fields)
        self.forwarded = 0

    def run(self) -> int:
        """Forward and write the lag until stopped; 0. Any Redis error (an outage, a
        failover, a full server) is logged and waited out with backoff: a forward is safe
        to repeat, and the shards' consumers report the outage."""
        backoff = Backoff(0.1, 5.0)
        next_lag, joined = 0.0, False
        while not self.stop.is_set():
            try:
                if not joined:
                    ensure_group(self.client, self.base)
                    joined = True
                self.step()
                if time.monotonic() >= next_lag:
                    self.trim()
                    self.write_lag()
                    next_lag = time.monotonic() + LAG_INTERVAL_S
                backoff = Backoff(0.1, 5.0)
            except redis.RedisError as exc:
                joined = False  # the server may have restarted without the group
                self.log.warning("forward_failed", extra={"error": str(exc)})
                self.stop.wait(backoff.next_delay())
        return 0

    def step(self) -> int:
        """Forward what a dead worker left pending, else what is new; how many moved."""
        claimed = self.client.xautoclaim(
            self.base.stream,
            self.base.group,
            self.consumer,
            self.idle_ms,
            "0-0",
            count=FORWARD_COUNT,
        )[1]
        if claimed:
            return self.forward(claimed)
        streams: dict[Any, Any] = {self.base.stream: ">"}
        read: Any = self.client.xreadgroup(
            self.base.group, self.consumer, streams, count=FORWARD_COUNT, block=FORWARD_BLOCK_MS
        )
        return self.forward(read[0][1] if read else [])

    def forward(self, entries: Sequence[Any]) -> int:
        """Each entry to its shard (an invalid one to the DLQ), then acknowledged and
        deleted on the base key."""
        if not entries:
            return 0
        pipe = self.client.pipeline(transaction=False)
        ids, invalid = [], []
        for entry_id, fields in entries:
            ids.append(entry_id)
            if not fields:  # deleted meanwhile: nothing to forward
                continue
            try:
                key = self.key_of(fields)
            except Exception as exc:  # not a valid message: said in its dead letter
                invalid.append((entry_id, fields, describe_error(exc)))
                continue
            pipe.xadd(self.shards[shard_of(key, len(self.shards))].stream, fields)
        pipe.execute()
        if invalid:
            self._dead_letter(invalid)
        done = self.client.pipeline(transaction=False)
        done.xack(self.base.stream, self.base.group, *ids)
        done.xdel(self.base.stream, *ids)
        done.execute()
        self.forwarded += len(ids)
        self.log.debug("forwarded", extra={"entries": len(ids), "total": self.forwarded})
        return len(ids)

    def _dead_letter(self, invalid: list[tuple[str, Mapping[str, str], str]]) -> None:
        settings = self.settings

        def send() -> Any:
            pipe = self.client.pipeline(transaction=False)
            for entry_id, fields, error in invalid:
                letter = build_dead_letter(
                    self.base, entry_id, fields, "invalid_message", error, 1, self.consumer
                )
                ttl, maxlen = settings.idempotency_ttl_s, settings.dlq_maxlen
                queue_dead_letter(pipe, self.base, letter, maxlen, ttl)
            return pipe.execute()

        with_scripts(self.client, [DEAD_LETTER], send)
        for entry_id, _fields, error in invalid:
            self.log.error(
                "dead_lettered",
                extra={"message_id": entry_id, "reason": "invalid_message", "error": error},
            )

    def trim(self) -> None:
        """Delete the base entries every worker is done with: those delivered and no longer
        pending. Each pass deletes what it acknowledged; this finds what a worker that
        died between its acknowledgement and its ``XDEL`` left behind."""
        groups: Any = self.client.xinfo_groups(self.base.stream)
        group = next((g for g in groups if g["name"] == self.base.group), None)
        if group is None:
            return
        pending: Any = self.client.xpending(self.base.stream, self.base.group)
        oldest = pending["min"] if pending["pending"] else None
        minid = oldest or _after(group["last-delivered-id"])
        self.client.xtrim(self.base.stream, minid=minid, approximate=False)

    def write_lag(self) -> int:
        """The stream's one lag: the base key's and every shard's, summed."""
        lag = sum(measure_lag(self.client, keys).lag for keys in (self.base, *self.shards))
        pipe = self.client.pipeline(transaction=False)
        queue_lag_key(pipe, self.base, lag, self.settings.lag_key_ttl_s)
        queue_record_lag(pipe, self.base, lag)
        pipe.execute()
        return lag


def _after(entry_id: str) -> str:
    """The id right after ``entry_id`` (``XTRIM MINID`` keeps ids from this one on)."""
    ms, _, seq = entry_id.partition("-")
    return f"{ms}-{int(seq or 0) + 1}"


def key_reader(
    parse: Callable[[Mapping[str, str]], Any], natural_key: Callable[[Any], str]
) -> KeyOf:
    """The natural key of an entry as the processor reads it; raises for an entry the
    processor refuses, or whose key is not text."""

    def key_of(fields: Mapping[str, str]) -> str:
        key = natural_key(parse(fields))
        if not isinstance(key, str):
            raise TypeError(f"the natural key is {type(key).__name__}, not text")
        return key

    return key_of
