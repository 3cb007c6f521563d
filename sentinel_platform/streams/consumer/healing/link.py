"""The worker's own registered connection: what lets the others see it die at once.

:class:`Link` holds a connection of its own to the node of the worker's registration key
(``dedicated_client``), registers that connection's id beside the lease (the
``REGISTER`` script: only while the lease is ours), and sits in a blocking read on it, so
a dropped connection is seen at once; it then reconnects and registers the new id. The
other workers' :class:`~sentinel_platform.streams.consumer.healing.liveness.Watch` reads the
registration and judges a worker dead when its registered connection is gone.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Mapping

import redis

from sentinel_platform.logs import BoundLogger
from sentinel_platform.streams.consumer.healing.liveness import (
    LINK_BLOCK_S,
    LINK_RETRY_MAX_S,
    LINK_RETRY_S,
    REGISTER,
    REGISTRATION_TTL_MS,
    Registration,
    dedicated_client,
    node_of,
    registration_key,
)
from sentinel_platform.streams.plumbing.connection import TRANSIENT_ERRORS, RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys

log = logging.getLogger(__name__)


def retry_delay(failures: int) -> float:
    """Seconds to wait after ``failures`` failed turns in a row (at least 2): doubling from
    ``LINK_RETRY_S``, capped at ``LINK_RETRY_MAX_S``. The exponent is capped too: an outage
    of a thousand turns would otherwise raise ``OverflowError`` and end the link's thread."""
    doublings = min(max(failures - 2, 0), 30)
    return float(min(LINK_RETRY_S * 2**doublings, LINK_RETRY_MAX_S))


class Link(threading.Thread):
    """The worker's dedicated connection, registered beside its lease.

    It sits in a blocking read on that connection, so a dropped connection is seen at
    once; it then reconnects and registers the new id.
    """

    def __init__(
        self,
        client: RedisClient,
        keys: StreamKeys,
        consumer: str,
        lease_value: str,
        log_fields: Mapping[str, str],
    ) -> None:
        super().__init__(name="liveness-link", daemon=True)
        self.client = client
        self.lease_key = keys.lease(consumer)
        self.key = registration_key(keys, consumer)
        self.wake_key = f"{self.key}|wake"
        self.lease_value = lease_value
        self.log = BoundLogger(log, log_fields)
        self._client_name = f"sentinel-liveness-{consumer}"[:60].replace(" ", "_")
        self._halt = threading.Event()
        self._conn: redis.Redis | None = None
        self.registered: Registration | None = None

    def run(self) -> None:
        failures = 0
        while not self._halt.is_set():
            try:
                self._serve()
                if failures > 1:
                    self.log.info("liveness_link_restored")
                failures = 0
            except redis.exceptions.NoPermissionError as exc:
                self._unavailable(exc)
                return
            except (*TRANSIENT_ERRORS, redis.RedisError) as exc:
                if "NOPERM" in str(exc):
                    self._unavailable(exc)
                    return
                failures += 1
                self._drop()
                if failures == 2:  # the immediate reconnection failed too: once per outage
                    self.log.warning("liveness_link_lost", extra={"error": str(exc)})
                if failures > 1:
                    self._halt.wait(retry_delay(failures))
            except Exception:  # the link must outlive any single bad turn
                self.log.exception("liveness_link_error")
                self._drop()
                self._halt.wait(LINK_BLOCK_S)

    def _serve(self) -> None:
        """Register this connection's id, then wait on it until it drops or times out."""
        if self._conn is None:
            self._conn = dedicated_client(self.client, self.key, self._client_name)
        conn = self._conn
        client_id = int(conn.client_id())
        registration = Registration(self.lease_value, client_id, node_of(self.client, self.key))
        held = REGISTER.run(
            conn,
            [self.lease_key, self.key],
            [self.lease_value, registration.encode(), REGISTRATION_TTL_MS],
        )
        self.registered = registration if held else None
        if self._halt.is_set():
            return
        # Not the lease holder right now (it is being taken again): try again soon.
        conn.blpop([self.wake_key], timeout=LINK_BLOCK_S if held else LINK_RETRY_S * 2)

    def _drop(self) -> None:
        if self._conn is not None:
            with contextlib.suppress(Exception):  # closing a broken one may fail: no matter
                self._conn.close()
            self._conn = None

    def _unavailable(self, exc: Exception) -> None:
        self.log.warning(
            "liveness_link_unavailable",
            extra={
                "error": str(exc),
                "fallback": "lease TTL (grant +client|id for recovery at connection close)",
            },
        )
        self._drop()

    def stop(self) -> None:
        self._halt.set()
