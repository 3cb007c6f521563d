"""XADD batches sent as one write: hand-encoded RESP on a plain client, a pipeline on a cluster.

Publishing is bound by the client, not the server: redis-py's per-command packing and
pipeline bookkeeping cost several times the server's own work for these small commands.
So on a plain client a batch of XADDs is encoded by hand (:class:`XaddEncoder`: a few byte
joins per entry, the field names' encoding cached per shape) and sent in one write whose
replies are read in order (:func:`send_packed`), exactly what a pipeline would send. A
cluster client keeps redis-py's pipeline, which routes by slot. :func:`batch_sender` picks
the one that fits the client.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import redis

from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys


class XaddEncoder:
    """XADD commands to one stream, encoded as RESP bytes by hand.

    Encoding an entry is a few byte joins; redis-py's per-command packing and pipeline
    bookkeeping cost several times the server's own work for these small commands.
    """

    def __init__(self, stream: str, maxlen: int | None = None) -> None:
        args = [b"XADD", stream.encode()]
        if maxlen is not None:
            args += [b"MAXLEN", b"~", str(maxlen).encode()]
        args.append(b"*")
        self._head = b"".join(_bulk(arg) for arg in args)
        self._argc = len(args)
        self._names: dict[tuple[str, ...], tuple[bytes, list[bytes]]] = {}

    def encode(self, fields: Mapping[str, str]) -> bytes:
        """The RESP array of ``XADD stream [MAXLEN ~ n] * field value ...``."""
        names = tuple(fields)
        cached = self._names.get(names)
        if cached is None:
            header = b"*%d\r\n%s" % (self._argc + 2 * len(names), self._head)
            cached = self._names[names] = (header, [_bulk(n.encode()) for n in names])
        header, encoded_names = cached
        parts = [header]
        for name, value in zip(encoded_names, fields.values(), strict=True):
            data = value.encode()
            parts.append(b"%s$%d\r\n%s\r\n" % (name, len(data), data))
        return b"".join(parts)


def _bulk(value: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(value), value)


def send_packed(client: redis.Redis, commands: list[bytes]) -> list[Any]:
    """Write ``commands`` in one send and read their replies, as a pipeline would.

    A connection error resends the whole batch under the client's retry policy (the
    workers' idempotency markers absorb an entry written twice); an error reply raises
    and the connection, with replies still unread, is dropped.
    """
    pool = client.connection_pool
    conn = pool.get_connection()
    payload = b"".join(commands)

    def send() -> list[Any]:
        conn.send_packed_command([payload], check_health=False)
        return [conn.read_response() for _ in commands]

    try:
        replies: list[Any] = conn.retry.call_with_retry(send, lambda _error: conn.disconnect())
        return replies
    except BaseException:
        conn.disconnect()
        raise
    finally:
        pool.release(conn)


def batch_sender(
    client: RedisClient, keys: StreamKeys, maxlen: int | None
) -> Callable[[list[Mapping[str, str]]], list[Any]]:
    """How one batch is sent: hand-encoded on a plain client, a pipeline on a cluster."""
    if isinstance(client, redis.Redis):
        encoder = XaddEncoder(keys.stream, maxlen)
        plain = client
        return lambda batch: send_packed(plain, [encoder.encode(fields) for fields in batch])

    def pipeline(batch: list[Mapping[str, str]]) -> list[Any]:
        pipe = client.pipeline(transaction=False)
        for fields in batch:
            entry: dict[Any, Any] = dict(fields)
            pipe.xadd(keys.stream, entry, maxlen=maxlen, approximate=True)
        ids: list[Any] = pipe.execute()
        return ids

    return pipeline
