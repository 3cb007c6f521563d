"""Bounding a worker's stop: one deadline, Redis calls that cannot outlast it, a backstop.

A stop (SIGTERM/SIGINT, or a consumer name taken by another process) ends the process
within ``SENTINEL_SHUTDOWN_TIMEOUT_S`` + :data:`STOP_MARGIN_S` whatever Redis does, even a
server that accepts connections and never answers (frozen, a stalled VM). The loop's own
client cannot promise that: it retries, health-checks with PINGs and waits out socket
timeouts of 10 s or more per attempt. So the stop path never uses it:

* :class:`StopBudget` is the one deadline of a stop, taken when the stop is requested.
  Calls in flight may finish, and refused commits are retried, until
  ``SENTINEL_SHUTDOWN_TIMEOUT_S`` has passed (:attr:`StopBudget.work_deadline`); the
  Redis calls of the stop (commits, the hand-back, the group leave or lease release) and
  the heartbeat's end all have to be done :data:`FINAL_MARGIN_S` later
  (:attr:`StopBudget.deadline`), so a hand-back or a commit of calls that finished right
  at the timeout is still attempted.
* :func:`bounded_client` makes the client of one step of the stop path: its own
  connection to the node serving the stream, no retry, no health-check PING, connect and
  socket timeouts no longer than the time left.
* :class:`StopBackstop` is a thread that waits for the stop and, should the stop still run
  at :attr:`StopBudget.backstop` (the loop's thread was inside a Redis call of the loop's
  own client when the stop came, or anything else no deadline reached), logs
  ``stop_overran`` and ends the process: exiting is the only sure way to abandon a call
  stuck in a socket. Its messages stay pending on a consumer whose lease runs out within
  one TTL, so the survivors recover them; commits are idempotent.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from sentinel_platform.logs import BoundLogger
from sentinel_platform.streams.consumer.healing.liveness import node_client
from sentinel_platform.streams.plumbing.connection import RedisClient

log = logging.getLogger(__name__)

#: After the work deadline: the last commit, the hand-back, the heartbeat's end and the
#: group leave / lease release.
FINAL_MARGIN_S = 1.5
#: The documented bound: a stop ends the process within SENTINEL_SHUTDOWN_TIMEOUT_S + this.
STOP_MARGIN_S = 3.0
#: Shortest socket timeout worth a try; with less time left a step is not attempted.
MIN_CALL_S = 0.05


class NoTimeLeftError(redis.TimeoutError):
    """The stop's deadline has passed: the step was not attempted (as if Redis timed out)."""


@dataclass(frozen=True, slots=True)
class StopBudget:
    """The one deadline of a stop, measured from when it was requested (monotonic clock)."""

    timeout_s: float
    started: float = field(default_factory=time.monotonic)

    @property
    def work_deadline(self) -> float:
        """Waiting for calls in flight and retrying refused commits end here."""
        return self.started + self.timeout_s

    @property
    def deadline(self) -> float:
        """Every Redis call of the stop and the heartbeat's end are over by here."""
        return self.work_deadline + FINAL_MARGIN_S

    @property
    def backstop(self) -> float:
        """The process ends here whatever is still running."""
        return self.started + self.timeout_s + STOP_MARGIN_S

    def left(self, final: bool = False, now: float | None = None) -> float:
        """Seconds left until the work deadline (``final``: until :attr:`deadline`)."""
        end = self.deadline if final else self.work_deadline
        return max(end - (time.monotonic() if now is None else now), 0.0)


def bounded_client(client: RedisClient, key: str, timeout_s: float) -> redis.Redis:
    """A client for one step of the stop path: one connection of its own to the node
    serving ``key`` (every key the stop path writes shares the stream's hash slot), never
    retried, no health-check PING, every connect and read bounded by ``timeout_s``.

    Raises :class:`NoTimeLeftError` when ``timeout_s`` is too short to try.
    """
    if timeout_s < MIN_CALL_S:
        raise NoTimeLeftError(f"the stop's deadline has passed ({timeout_s:.3f} s left)")
    pool = node_client(client, key).connection_pool
    kwargs = dict(pool.connection_kwargs)
    kwargs.pop("retry_on_error", None)
    kwargs.update(
        retry=Retry(NoBackoff(), 0),
        health_check_interval=0,
        socket_timeout=timeout_s,
        socket_connect_timeout=timeout_s,
    )
    bounded = redis.ConnectionPool(connection_class=pool.connection_class, **kwargs)
    return redis.Redis(connection_pool=bounded, single_connection_client=True)


class StopBackstop(threading.Thread):
    """Ends the process if a stop outlives its budget; owned by the consumer.

    ``on_overrun()`` returns the exit status and runs just before the exit (it logs what
    is left). :meth:`budget` is the stop's one deadline, shared with the shutdown.
    """

    #: How often the thread looks whether the consumer finished without a stop (burst mode).
    POLL_S = 0.5

    def __init__(
        self,
        stop: threading.Event,
        timeout_s: float,
        on_overrun: Callable[[StopBudget], int],
        log_fields: Mapping[str, str],
        exit_process: Callable[[int], None] = os._exit,
    ) -> None:
        super().__init__(name="stop-backstop", daemon=True)
        self.stop = stop
        self.timeout_s = timeout_s
        self.on_overrun = on_overrun
        self.log = BoundLogger(log, log_fields)
        self.exit_process = exit_process
        #: set once the consumer has stopped: the backstop then has nothing to do
        self.finished = threading.Event()
        self._lock = threading.Lock()
        self._budget: StopBudget | None = None

    def budget(self) -> StopBudget:
        """The stop's budget, from the first time it is asked for (the stop request)."""
        with self._lock:
            if self._budget is None:
                self._budget = StopBudget(self.timeout_s)
            return self._budget

    def run(self) -> None:
        while not self.stop.wait(self.POLL_S):
            if self.finished.is_set():
                return
        budget = self.budget()
        if self.finished.wait(max(budget.backstop - time.monotonic(), 0.0)):
            return
        status = 1
        try:
            status = self.on_overrun(budget)
        except Exception:  # the exit must happen whatever the report does
            self.log.exception("stop_overran")
        finally:
            for handler in logging.getLogger().handlers:
                handler.flush()
            self.exit_process(status)


__all__ = [
    "FINAL_MARGIN_S",
    "MIN_CALL_S",
    "STOP_MARGIN_S",
    "NoTimeLeftError",
    "StopBackstop",
    "StopBudget",
    "bounded_client",
]
