"""Reading new messages for one consumer: sent once, on a connection of its own, wakeable.

``XREADGROUP ... >`` changes state as it answers: the server puts what it delivers in
the consumer's PEL. The client's retry would re-send a read whose reply was lost and
deliver a second batch while the first sits unseen, so the read runs on a dedicated
connection that never retries (a lost reply raises; the consumer then takes the lost
batch back from its PEL). Knowing that connection's ``CLIENT ID`` also lets another
thread cut a blocked read short with ``CLIENT UNBLOCK``: the liveness watch does so the
moment it confirms another worker's death, so recovery does not wait out the block.
``CLIENT UNBLOCK`` needs ``+client|unblock`` (see the README's ACL); without it the
read simply runs to its block time, logged once.

Until a read's reply is in hand the read is *uncertain* (:attr:`GroupReader.uncertain`): it
may have delivered a batch that only the PEL knows of, which
:meth:`GroupReader.take_back_lost` then returns (``lost_read``), before recovery would
count another delivery of it.
"""

from __future__ import annotations

import logging
from typing import Any

import redis

from sentinel_platform.logs import BoundLogger
from sentinel_platform.streams.consumer.healing.liveness import dedicated_client, node_client
from sentinel_platform.streams.consumer.outcomes import Delivery
from sentinel_platform.streams.consumer.reading.lost_read import lost_read
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys

log = logging.getLogger(__name__)


class GroupReader:
    """``XREADGROUP GROUP g c COUNT n [BLOCK ms] STREAMS s >``, once per call."""

    def __init__(
        self, client: RedisClient, keys: StreamKeys, consumer: str, log_fields: dict[str, str]
    ) -> None:
        self.client = client
        self.keys = keys
        self.consumer = consumer
        self.log = BoundLogger(log, log_fields)
        self.wake_enabled = True
        self._connection: redis.Redis | None = None
        self._client_id: int | None = None
        self._blocking = False
        #: a read was sent and its reply is not in hand (see the module docstring)
        self.uncertain = False

    def read_new(self, count: int, block_ms: int | None) -> list[Delivery]:
        """New messages (``XREADGROUP ... >``) as first deliveries, sent once: a lost reply
        is never re-sent, and leaves :attr:`uncertain` set."""
        self.uncertain = True
        reply = self.read(count, block_ms)
        self.uncertain = False
        return deliveries(reply)

    def take_back_lost(self, scan: int, in_hand: set[str]) -> list[Delivery]:
        """What a read whose reply was lost delivered (looking through at most ``scan`` of
        our pending entries, ``in_hand`` excluded)."""
        bodies = lost_read(self.client, self.keys, self.consumer, scan, in_hand)
        self.uncertain = False
        self.log.warning("uncertain_read", extra={"taken_back": len(bodies)})
        return bodies

    def read(self, count: int, block_ms: int | None) -> Any:
        """The parsed reply (as ``client.xreadgroup`` returns it); raises on a lost reply."""
        connection = self._connect()
        streams: dict[Any, Any] = {self.keys.stream: ">"}
        self._blocking = block_ms is not None
        try:
            return connection.xreadgroup(
                self.keys.group, self.consumer, streams, count=count, block=block_ms
            )
        except BaseException:
            self.reset()  # its state is unknown: the next read connects afresh
            raise
        finally:
            self._blocking = False

    def wake(self) -> None:
        """Cut a blocked read short (from another thread); it returns no messages."""
        client_id = self._client_id
        if not (self._blocking and self.wake_enabled and client_id is not None):
            return
        try:
            node_client(self.client, self.keys.stream).client_unblock(client_id)
        except redis.exceptions.NoPermissionError as exc:
            self._disable(exc)
        except redis.ResponseError as exc:
            if "NOPERM" not in str(exc):
                raise
            self._disable(exc)
        except redis.RedisError as exc:  # the read ends at its block time anyway
            self.log.debug("wake_failed", extra={"error": str(exc)})

    def reset(self) -> None:
        """Drop the connection (after an error, a failover); the next read reconnects."""
        connection, self._connection, self._client_id = self._connection, None, None
        if connection is not None:
            connection.close()

    def _connect(self) -> redis.Redis:
        if self._connection is None:
            name = f"{self.consumer}:reader"
            connection = dedicated_client(self.client, self.keys.stream, name)
            try:
                self._client_id = int(connection.client_id())
            except BaseException:
                connection.close()
                raise
            self._connection = connection
        return self._connection

    def _disable(self, exc: Exception) -> None:
        self.wake_enabled = False
        self.log.warning(
            "read_wake_unavailable",
            extra={
                "error": str(exc),
                "fallback": "recovery waits for the read's block time "
                "(grant +client|unblock to wake it at a death)",
            },
        )


def deliveries(reply: Any) -> list[Delivery]:
    """The new messages of an XREADGROUP reply (first deliveries)."""
    return [
        Delivery(message_id, fields or {}, 1)
        for _stream, entries in (reply or [])
        for message_id, fields in entries
    ]
