"""How a worker rides out what Redis does to it: backoff, reconnects, and one log line each.

:class:`Outages` acts on the action that
:func:`~sentinel_platform.streams.consumer.redis_errors.classify` names for an error: it
logs it (``redis_unavailable``, ``redis_error``, ``iteration_failed``), drops kept
connections after a failover, and waits out a backoff that the worker's stop cuts short.
:meth:`Outages.retrying` runs a start-up step until Redis takes it. Healing a vanished
group is the consumer's (it needs the group and the lease), so a ``heal`` is handed back
to the caller.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import redis

from sentinel_platform.logs import BoundLogger
from sentinel_platform.schemas import describe_error
from sentinel_platform.streams.consumer.redis_errors import Action, classify
from sentinel_platform.streams.plumbing.backoff import Backoff
from sentinel_platform.streams.plumbing.connection import (
    FAILOVER_ERRORS,
    TRANSIENT_ERRORS,
    RedisClient,
    reset_connections,
)

log = logging.getLogger(__name__)

BACKOFF_START_S = 0.1
BACKOFF_CAP_S = 5.0


class RedisRefusedError(RuntimeError):
    """Redis refuses a command the worker needs, and no wait can change it (ACL, a command
    the server does not know): start-up stops (exit status 2)."""


class Outages:
    """Backoff and reconnects for one consumer; the stop event cuts every wait short."""

    def __init__(
        self,
        client: RedisClient,
        stop: threading.Event,
        log_fields: dict[str, str],
        *,
        on_outage: Callable[[], None],
        on_reset: Callable[[], None],
        uncommitted: Callable[[], int],
    ) -> None:
        self.client = client
        self.stop = stop
        self.log = BoundLogger(log, log_fields)
        self._on_outage = on_outage  # leases may expire meanwhile: recovery_grace.py
        self._on_reset = on_reset  # connections bound to a node (the group reader)
        self._uncommitted = uncommitted
        self.backoff = Backoff(BACKOFF_START_S, BACKOFF_CAP_S)

    def met(self, exc: Exception) -> Action:
        """Act on ``exc`` met in a pass; returns its action (``heal`` is the caller's)."""
        action = classify(exc)
        if action == "failover":
            self.reset_connections()
            self.wait(exc)
        elif action in ("outage", "refused"):
            self.wait(exc)  # e.g. OOM or a wrong key type: wait, never crash-loop
        elif action == "bug":
            self.bug(exc)
        return action

    def retrying(self, step: Callable[[], None]) -> bool:
        """``step()`` until it succeeds (True) or the worker is asked to stop (False).

        Redis down, failing over or refusing for now is waited out with backoff; a
        refusal no wait can change raises :class:`RedisRefusedError`.
        """
        while not self.stop.is_set():
            try:
                step()
            except (redis.RedisError, *FAILOVER_ERRORS) as exc:
                action = classify(exc)
                if action == "refused":
                    raise RedisRefusedError(
                        f"Redis refuses a command the worker needs: {exc} (see README 'Redis ACL')"
                    ) from None
                if action == "failover":
                    self.reset_connections()
                self.wait(exc)
            else:
                self.reached()
                return True
        return False

    def wait(self, exc: Exception) -> None:
        """Log and back off; buffered outcomes are kept and committed when Redis answers."""
        if isinstance(exc, (*TRANSIENT_ERRORS, *FAILOVER_ERRORS)):
            self._on_outage()
        delay = self.backoff.next_delay()
        self.log.warning(
            "redis_error" if isinstance(exc, redis.ResponseError) else "redis_unavailable",
            extra={
                "error": str(exc),
                "retry_in_s": delay,
                "attempt": self.backoff.attempt,
                "uncommitted": self._uncommitted(),
            },
        )
        self.stop.wait(delay)

    def bug(self, exc: Exception) -> None:
        """An error no branch expects (a bug, here or in a plug-in): log it with its
        traceback and back off. The caller drops the pass's buffered outcomes: one of them
        may be what fails, and their messages, still pending, are decided again."""
        delay = self.backoff.next_delay()
        self.log.error(
            "iteration_failed",
            exc_info=exc,
            extra={
                "error": describe_error(exc),
                "retry_in_s": delay,
                "uncommitted": self._uncommitted(),
            },
        )
        self.stop.wait(delay)

    def reset_connections(self) -> None:
        """A failover or resharding: drop kept connections and the slot map."""
        self._on_reset()
        try:
            reset_connections(self.client)
        except (*TRANSIENT_ERRORS, *FAILOVER_ERRORS) as reset_exc:
            self.log.warning("reconnect_failed", extra={"error": str(reset_exc)})

    def reached(self) -> None:
        """Redis answered: log the end of an outage once."""
        if self.backoff.attempt:
            self.log.info(
                "redis_reachable",
                extra={"after_attempts": self.backoff.attempt},
            )
        self.backoff.reset()
