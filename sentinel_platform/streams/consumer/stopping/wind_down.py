"""A worker's stop: one deadline for everything it does, whatever Redis does meanwhile.

:class:`Stopping` finishes what a consumer holds when it is asked to stop (SIGTERM/SIGINT,
its name taken) or its burst run is over:

1. the calls in progress may finish until ``SENTINEL_SHUTDOWN_TIMEOUT_S`` (their outcomes
   are settled); everything else in hand (the backlog, parked messages, waiting copies,
   calls still running then) is handed back: moved to the lease-less
   ``HANDBACK_CONSUMER`` with its delivery count restored, so any live worker claims it;
2. the outbox is settled, retried with backoff until the same deadline; outcomes Redis
   will not take by then are given up with one ``stopped_uncommitted`` line;
3. the heartbeat ends and the worker leaves the group (or at least releases its lease)
   within ``LEAVE_MARGIN_S`` more.

Every Redis call here goes through a client of its own, never retried, whose waits end
by the stop's deadline (``deadline.py``); a backstop thread ends the process if the stop
still runs at ``SENTINEL_SHUTDOWN_TIMEOUT_S + STOP_MARGIN_S``. The exit status says what
was left undone (:data:`~sentinel_platform.exit_codes.EXIT_UNCOMMITTED`): those messages
stay pending on this consumer and the survivors recover them, at once or once its lease
has run out; commits are idempotent.

What a stop needs of its consumer is :class:`StoppableConsumer`, a protocol the loop's
``Consumer`` satisfies: the stop path reads the consumer's parts through it and never
imports the loop, so the loop sits above the stop and nothing imports in a circle.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Protocol, TypeVar

import redis

from sentinel_platform.exit_codes import EXIT_NAME_IN_USE, EXIT_UNCOMMITTED
from sentinel_platform.logs import BoundLogger
from sentinel_platform.settings import Settings
from sentinel_platform.streams.consumer.calling.claims import Claims
from sentinel_platform.streams.consumer.calling.in_flight import Calls
from sentinel_platform.streams.consumer.healing.lease import Heartbeat, Lease
from sentinel_platform.streams.consumer.metrics import Metrics
from sentinel_platform.streams.consumer.outages import Outages
from sentinel_platform.streams.consumer.reading.group_read import GroupReader
from sentinel_platform.streams.consumer.settling.outbox import Outbox
from sentinel_platform.streams.consumer.stopping.deadline import (
    MIN_CALL_S,
    STOP_MARGIN_S,
    NoTimeLeftError,
    StopBackstop,
    StopBudget,
    bounded_client,
)
from sentinel_platform.streams.plumbing.connection import FAILOVER_ERRORS, RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys

log = logging.getLogger(__name__)
T = TypeVar("T")


class StoppableConsumer(Protocol):
    """What a stop reads and drives of the consumer it stops: its parts, its client and
    keys, its stop event, what it holds and its tally. Read-only properties, so a plain
    attribute satisfies each."""

    @property
    def client(self) -> RedisClient: ...
    @property
    def keys(self) -> StreamKeys: ...
    @property
    def settings(self) -> Settings: ...
    @property
    def log(self) -> BoundLogger: ...
    @property
    def stop(self) -> threading.Event: ...
    @property
    def metrics(self) -> Metrics: ...
    @property
    def lease(self) -> Lease: ...
    @property
    def heartbeat(self) -> Heartbeat: ...
    @property
    def reader(self) -> GroupReader: ...
    @property
    def calls(self) -> Calls: ...
    @property
    def claims(self) -> Claims | None: ...
    @property
    def outbox(self) -> Outbox: ...
    @property
    def outages(self) -> Outages: ...
    @property
    def tally(self) -> Counter[str]: ...
    @property
    def name_taken(self) -> bool: ...
    @property
    def lease_taken(self) -> bool: ...

    def held(self) -> int:
        """Messages in hand and not decided."""
        ...

    def report(self) -> object:
        """Count what was handled since the last report (its totals)."""
        ...


class Stopping:
    """The stop of one consumer; :meth:`shutdown` never raises a Redis error."""

    def __init__(self, consumer: StoppableConsumer) -> None:
        self.consumer = consumer
        self.log = BoundLogger(log, consumer.log.fields)
        #: ends the process if a stop outlives SENTINEL_SHUTDOWN_TIMEOUT_S + STOP_MARGIN_S
        self.backstop = StopBackstop(
            consumer.stop, consumer.settings.shutdown_timeout_s, self._overran, self.log.fields
        )

    @contextlib.contextmanager
    def backstop_running(self) -> Iterator[None]:
        """The backstop watches while the consumer runs; it is told when the run is over."""
        if self.backstop.ident is None:
            self.backstop.start()
        try:
            yield
        finally:
            self.backstop.finished.set()

    def shutdown(self) -> int:
        """Settle what is done, hand back the rest, leave the group; the exit status."""
        consumer = self.consumer
        self.log.info(
            "stopping",
            extra={
                "uncommitted": len(consumer.outbox),
                "in_flight": consumer.held(),
            },
        )
        budget = self.backstop.budget()
        undone: list[str] = []
        if not self._finish_calls(budget):
            undone.append("hand_back")
        if not self._settle_outbox(budget):
            undone.append("outcomes")
        if not consumer.heartbeat.stop(budget.left(final=True) / 2):  # half: the rest to leave
            self.log.warning("heartbeat_not_stopped")
        if not self._leave(budget):
            undone.append("lease")
        consumer.reader.reset()
        consumer.report()  # outcomes settled while stopping count in ``totals`` too
        snapshot = consumer.metrics.snapshot()
        self.log.info("stopped", extra={**snapshot, "undone": undone})
        if consumer.name_taken:
            return EXIT_NAME_IN_USE
        return EXIT_UNCOMMITTED if undone else 0

    def abandon_start(self) -> int:
        """Stopped before start-up finished: give back the lease if it was taken."""
        status = 0
        if self.consumer.lease_taken:
            budget = self.backstop.budget()
            self.consumer.heartbeat.stop(budget.left(final=True))
            if not self._release_lease(budget):
                status = EXIT_UNCOMMITTED
        self.log.info("stopped", extra={"started": False})
        return status

    def give_up(self) -> None:
        """The hang watchdog gives the worker up (it exits right after, on the heartbeat
        thread): delete the lease so survivors recover at once, trying for at most
        ``LEAVE_MARGIN_S`` whatever Redis does (the lease runs out otherwise)."""
        self.consumer.heartbeat.stop()
        self._release_lease(StopBudget(0.0))

    def _on_stop_path(self, budget: StopBudget, step: Callable[[RedisClient], T]) -> T:
        """``step(client)`` with a client whose every wait ends by the stop's deadline;
        raises a Redis error if Redis does not answer in time."""
        consumer = self.consumer
        client = bounded_client(consumer.client, consumer.keys.stream, budget.left(final=True))
        try:
            return step(client)
        finally:
            client.close()

    def _finish_calls(self, budget: StopBudget) -> bool:
        """Calls in progress may finish until the work deadline (their outcomes are
        settled), the rest is handed back; False if the hand-back failed (those messages
        stay pending on us)."""
        consumer = self.consumer
        waiting = consumer.claims.take_back() if consumer.claims is not None else []
        outcomes, rest = consumer.calls.settle_running(budget.work_deadline)
        rest += waiting
        consumer.outbox.extend(outcomes)
        if not rest:
            return True
        deliveries = [p.delivery for p in rest]
        try:
            self._on_stop_path(budget, lambda client: consumer.outbox.hand_back(deliveries, client))
        except (redis.RedisError, *FAILOVER_ERRORS) as exc:  # they stay pending on us
            self.log.warning("hand_back_failed", extra={"error": str(exc)})
            return False
        consumer.tally["handed_back"] += len(rest)
        return True

    def _settle_outbox(self, budget: StopBudget) -> bool:
        """Settle what is done, retrying with backoff until the work deadline; False if
        outcomes were given up (``stopped_uncommitted``): their messages stay pending."""
        consumer = self.consumer
        refused: Exception | None = None  # what Redis said last: the reason given up
        while len(consumer.outbox):
            try:
                consumer.tally.update(self._on_stop_path(budget, consumer.outbox.flush))
            except (redis.RedisError, *FAILOVER_ERRORS) as exc:
                if isinstance(exc, redis.ResponseError) and "NOGROUP" in str(exc):
                    self.log.warning("group_missing", extra={"error": str(exc)})
                    consumer.outbox.clear()  # their deliveries vanished with the group
                    return True
                if not isinstance(exc, NoTimeLeftError):
                    refused = exc
                if budget.left() < MIN_CALL_S:
                    self.log.error(
                        "stopped_uncommitted",
                        extra={
                            "error": str(refused or exc),
                            "left": len(consumer.outbox),
                            "timeout_s": budget.timeout_s,
                        },
                    )
                    return False  # survivors recover them; commits are idempotent
                time.sleep(min(consumer.outages.backoff.next_delay(), budget.left()))
        return True

    def _leave(self, budget: StopBudget) -> bool:
        """Leave the group with the lease, or at least release the lease; False if the
        lease may still be there (it then runs out within one TTL)."""
        try:
            left = self._on_stop_path(budget, self.consumer.lease.leave)
        except (redis.RedisError, *FAILOVER_ERRORS) as exc:
            self.log.warning("leave_failed", extra={"error": str(exc)})
            return self._release_lease(budget)  # at least the lease, if Redis takes that
        self.log.info(
            "left_group" if left == "left" else "kept_in_group",
            extra={"outcome": left},
        )
        return True

    def _release_lease(self, budget: StopBudget) -> bool:
        """Delete our lease if we can, so survivors recover our messages at once; False
        if Redis did not take it in time (the lease then runs out within one TTL)."""
        try:
            self._on_stop_path(budget, self.consumer.lease.release)
        except (redis.RedisError, *FAILOVER_ERRORS) as exc:
            self.log.warning("release_failed", extra={"error": str(exc)})
            return False
        return True

    def _overran(self, budget: StopBudget) -> int:
        """The stop outlived its bound (the backstop ends the process): say what is left;
        the exit status."""
        consumer = self.consumer
        self.log.error(
            "stop_overran",
            extra={
                "uncommitted": len(consumer.outbox),
                "in_flight": consumer.held(),
                "timeout_s": budget.timeout_s,
                "bound_s": budget.timeout_s + STOP_MARGIN_S,
            },
        )
        return EXIT_NAME_IN_USE if consumer.name_taken else EXIT_UNCOMMITTED
