"""Hung workers: how a worker whose lease is alive but which makes no progress gives up.

Leases alone would let a hung worker (stuck in a call that never returns, a deadlock)
keep its messages forever, since a live lease is never robbed. Decided policy: the
heartbeat thread also watches the message in hand. When one message has been in hand
longer than ``SENTINEL_HANG_TIMEOUT_MS`` (default 300 s, ten times the default reclaim
idle time), the worker is considered hung: it deletes its lease, logs ``worker_hung``
and exits the process with :data:`EXIT_HUNG`. Survivors then recover its messages
exactly as they would a killed worker's, and the supervisor (``sentinel up``, systemd,
Kubernetes) restarts it. A merely slow message (say three times the reclaim idle time)
is far below the hang timeout and is never robbed. Exiting is the only reliable way to
abandon a stuck call in Python; stealing from a live process would instead risk two
workers running the same message side by side.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Callable

from sentinel_platform.exit_codes import EXIT_HUNG
from sentinel_platform.logs import BoundLogger
from sentinel_platform.streams.consumer.processor import turn_wait_of

log = logging.getLogger(__name__)


class InHand:
    """The messages being processed right now, one per thread, and since when.

    Written by the thread processing each message (the loop, or the call threads of
    :class:`~.calls.Calls` with ``SENTINEL_WORKER_CONCURRENCY`` > 1), read by the heartbeat
    thread. Each thread owns one slot of a dict keyed by its thread id, replaced or removed
    in single operations that CPython makes atomic, so no lock is taken; the watchdog
    looks at the oldest.
    """

    __slots__ = ("_held",)

    def __init__(self) -> None:
        self._held: dict[int, tuple[str, float]] = {}

    def take(self, message_id: str) -> None:
        self._held[threading.get_ident()] = (message_id, time.monotonic())

    def drop(self) -> None:
        self._held.pop(threading.get_ident(), None)

    def held(self) -> tuple[str, float] | None:
        """(message id, seconds in hand) of the oldest message in hand, or None. The time
        its call spent waiting for its turn (``waited_for_turn``: a fleet rate-limit slot)
        is not in hand: a call paced by the fleet is not hung."""
        slots = [
            (message_id, since + turn_wait_of(ident))
            for ident, (message_id, since) in tuple(self._held.items())
        ]
        if not slots:
            return None
        message_id, since = min(slots, key=lambda slot: slot[1])
        return message_id, time.monotonic() - since

    def count(self) -> int:
        """How many messages are in hand now."""
        return len(self._held)


class HangWatchdog:
    """Called from every heartbeat; gives the worker up when one message outlives the limit."""

    def __init__(
        self,
        in_hand: InHand,
        hang_timeout_ms: int,
        give_up: Callable[[], None],
        log_fields: dict[str, str],
        exit_process: Callable[[int], None] = os._exit,
    ) -> None:
        self.in_hand = in_hand
        self.hang_timeout_s = hang_timeout_ms / 1000
        self.give_up = give_up
        self.log = BoundLogger(log, log_fields)
        self.exit_process = exit_process

    def check(self) -> None:
        held = self.in_hand.held()
        if held is None or held[1] <= self.hang_timeout_s:
            return
        message_id, seconds = held
        self.log.error(
            "worker_hung",
            extra={
                "message_id": message_id,
                "in_hand_s": round(seconds, 3),
                "hang_timeout_s": self.hang_timeout_s,
            },
        )
        try:
            self.give_up()  # delete the lease so survivors recover our messages now
        finally:
            for handler in logging.getLogger().handlers:
                handler.flush()
            self.exit_process(EXIT_HUNG)
