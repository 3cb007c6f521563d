"""The consumer loop: recover, read, call, settle, publish the lag; one path at every limit.

One pass, :meth:`Consumer.iteration`, returns an :class:`IterationReport`::

    collect finished calls            # calling/in_flight.py: outcomes, busy ones parked
    settle the outbox                 # settling/outbox.py: one round trip for all decided
    take back a lost read             # a read whose reply was lost: its batch, from the PEL
    call parked messages again        # a busy downstream's delay has passed
    recovery.step(room)               # claims due messages: dead workers', our own failures
    XREADGROUP > COUNT room BLOCK b   # reading/group_read.py: once; b <= 1 s, woken at a death
    triage the batch                  # reading/triage.py: dead letters, duplicates, due
    submit what is due                # calling/in_flight.py: threads, at most the limit
    write the lag key (rate-limited; the heartbeat writes it too)

Every call goes through :class:`~sentinel_platform.streams.consumer.calling.in_flight.Calls`,
whatever the concurrency: a pinned ``SENTINEL_WORKER_CONCURRENCY=1`` is a limit of one,
``auto`` an adaptive limit (``adaptive_limit.py``). ``room`` is how many more messages the
limit lets the worker take (with a read-ahead for slow calls while the stream is
backlogged: ``Calls.room``), so it holds what it can work on and every message it holds is
in its PEL (counted in the lag, recovered if it dies).

:meth:`Consumer.run` repeats it: as a service (``burst=False``, the worker process) until
asked to stop, or in burst mode (``burst=True``) until a pass finds nothing to do, nothing
is left uncommitted and we hold no pending message. Errors met in a pass are classified
once (``redis_errors.py``) and ridden out by ``outages.py``; a group deleted under the
worker is recreated (:meth:`Consumer._heal`). A stop is bounded by one deadline whatever
Redis does (``wind_down.py``).

Each step's part lives in the consumer's room for its phase (``reading``, ``calling``,
``settling``, ``healing``, ``stopping``); the loop stands above them all and is the only
module besides :mod:`~sentinel_platform.streams.consumer.parts` that imports every room.

Exit status of :meth:`Consumer.run` (the worker process): ``exit_codes.py``.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import TypeVar

from sentinel_platform.logs import BoundLogger
from sentinel_platform.settings import Settings
from sentinel_platform.streams.consumer.calling.concurrency_limit import ConcurrencyLimit
from sentinel_platform.streams.consumer.group import ensure_group
from sentinel_platform.streams.consumer.healing.lease import LeaseHeldError
from sentinel_platform.streams.consumer.metrics import Metrics
from sentinel_platform.streams.consumer.outcomes import (
    Commit,
    Delivery,
    IterationReport,
    Outcome,
    Prepared,
)
from sentinel_platform.streams.consumer.parts import Hooks, build_parts
from sentinel_platform.streams.consumer.processor import Processor
from sentinel_platform.streams.consumer.settling.outbox import ALL_SCRIPTS
from sentinel_platform.streams.consumer.stopping.wind_down import Stopping
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Longest a read blocks, so recovery runs at least once a second on an idle worker.
MAX_BLOCK_MS = 1000
#: Decided outcomes are settled at least this often while calls run.
FLUSH_INTERVAL_S = 0.05
#: After a lost read, how many batches' worth of our pending entries are looked through.
LOST_READ_SCAN = 10
#: In burst mode, how long an idle pass waits while our own failures await their retry.
BURST_POLL_S = 0.02
#: Recovery steps are at most this frequent (a death still wakes the read at once).
RECOVERY_INTERVAL_S = 0.1


class Consumer:
    """One worker's membership in one consumer group: the loop that ties its parts.

    Its collaborators are built here, in dependency order, each given what it needs at
    construction; none is patched afterwards.
    """

    def __init__(
        self,
        client: RedisClient,
        keys: StreamKeys,
        processor: Processor,
        settings: Settings,
        consumer: str,
        metrics: Metrics,
        stop: threading.Event | None = None,
        count: int | None = None,
        block_ms: int | None = None,
        limit: ConcurrencyLimit | None = None,
    ) -> None:
        self.client, self.keys, self.processor = client, keys, processor
        self.settings, self.consumer, self.metrics = settings, consumer, metrics
        self.stop = stop or threading.Event()
        self.count = count or settings.read_count
        self.block_ms = settings.block_ms if block_ms is None else block_ms
        self.log = BoundLogger(
            log, {"stream": keys.stream, "group": keys.group, "consumer": consumer}
        )
        hooks = Hooks(self._busy, self._lose_name, self._in_hand_ids, self._give_up)
        parts = build_parts(
            client,
            keys,
            processor,
            settings,
            consumer,
            metrics,
            self.stop,
            self.count,
            hooks,
            limit,
        )
        self.lease, self.reader, self.in_hand = parts.lease, parts.reader, parts.in_hand
        self.calls, self.outbox, self.claims = parts.calls, parts.outbox, parts.claims
        self.recovery, self.triage, self.outages = parts.recovery, parts.triage, parts.outages
        self.retention, self.lag, self.heartbeat = parts.retention, parts.lag, parts.heartbeat
        self.stopping = Stopping(self)
        self.name_taken = False
        self.lease_taken = False  # by start(): what a start-up cut short gives back
        self._burst = False
        self._started = False
        self._next_recovery = 0.0
        #: the last read got all it asked for: the stream has more (``Calls.room``)
        self._backlogged = False
        #: the last read got less than it asked for: nothing undelivered waited then
        self.caught_up = False
        #: what the current pass handled, by report field (``IterationReport``)
        self.tally: Counter[str] = Counter()
        #: everything handled since this consumer was made (the sum of every pass)
        self.totals = IterationReport()

    # --- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        """Join the group: scripts loaded, group ensured, lease taken, heartbeat running.

        Safe to call again after it raised (:meth:`run` retries it): every step is
        idempotent, and the lease is taken again only if it is free or already ours.
        """
        for script in ALL_SCRIPTS:
            script.load(self.client)
        ensure_group(self.client, self.keys)
        self.lease.acquire()
        self.lease_taken = True
        self.lag.write_quietly()  # a worker that is up says so at once, before its first read
        self.heartbeat.start()
        self._started = True
        self.log.info(
            "started",
            extra={
                "count": self.count,
                "block_ms": self.block_ms,
                "concurrency": self.settings.worker_concurrency_pinned or "auto",
                "limit": self.calls.limit.limit,
            },
        )

    def run(self, burst: bool = False) -> int:
        """Consume; the exit status of the worker process (``exit_codes.py``).

        ``burst=False`` (the worker process): until asked to stop. ``burst=True``: also
        return once a pass found no work, nothing is left uncommitted and no message is
        pending on us. Reads never block in burst mode. Both start (unless :meth:`start`
        was called already) and shut down the same way.
        """
        self._burst = burst
        with self.stopping.backstop_running():
            if not self._started and not self.outages.retrying(self.start):
                return self.stopping.abandon_start()  # stopped while waiting at start-up
            while not self.stop.is_set():
                report = self._guarded(self.iteration)
                if burst and report is not None and report.idle:
                    drained = self._guarded(self._drained)
                    if drained:
                        break
                    if drained is not None:
                        self.stop.wait(BURST_POLL_S)  # our own failures wait for their retry
            return self.shutdown()

    def shutdown(self) -> int:
        """Settle what is done, hand back the rest, leave; see ``wind_down.py``."""
        return self.stopping.shutdown()

    def _guarded(self, action: Callable[[], T]) -> T | None:
        """``action()``; every error is handled (``outages.py``), never raised."""
        try:
            result = action()
        except Exception as exc:  # a bug met on one message must not end the process
            what = self.outages.met(exc)
            if what == "heal":
                self._heal(exc)
            elif what == "bug":
                self.outbox.clear()  # one may be what fails: decided again later
            return None
        self.outages.reached()
        return result

    # --- one pass ----------------------------------------------------------------------------
    def iteration(self) -> IterationReport:
        """One pass: settle, recover and read what the limit has room for, submit it, and
        wait a little for a call to finish (a fast processor's are settled in the pass)."""
        self.outbox.extend(self.calls.collect())
        self._flush_due()
        if self.reader.uncertain:  # before recovery, which would count another delivery
            lost = self.reader.take_back_lost(LOST_READ_SCAN * self.count, self._in_hand_ids())
            self._take(lost, "read")
        self.calls.resubmit_due(time.monotonic())
        if self.claims is not None:  # copies waiting on another worker's claim
            mine, done = self.claims.recheck(time.monotonic())
            self.outbox.extend(done)
            self.calls.submit(mine)
        room = self.calls.room(self.count, self._backlogged)
        recovered = self.recovery.step(room) if room and self._recovery_due() else []
        if recovered and len(recovered) >= room:  # the room was the bound: look again now
            self._next_recovery = 0.0
        self._take(recovered, "recovered")
        batch: list[Delivery] = []
        room = self.calls.room(self.count, self._backlogged)
        if room and not self.stop.is_set():
            waiting = bool(recovered) or bool(self.calls.running)
            batch = self.reader.read_new(room, self._block(waiting))
            self._backlogged = len(batch) >= room  # more to read: read ahead (in_flight.py)
            self.caught_up = not self._backlogged  # a re-screen may call (workers.rescreening)
            self._take(batch, "read")
        if self.calls.running:  # wait for a call rather than spin
            self.outbox.extend(self.calls.collect(FLUSH_INTERVAL_S))
        elif not batch and not recovered and self._block(False) is None and not self._burst:
            self.stop.wait(0.05)  # --block-ms 0: poll, but do not spin
        self._flush_due()
        if self.stop.is_set():
            self._hand_back(self.take_back())
        elif self.claims is not None:
            self.claims.keep(self.calls.keys_in_hand())
        self.lag.maybe_write()
        self.retention.maybe_trim()  # at most once per SENTINEL_STREAM_RETENTION_INTERVAL_S
        return self.report()

    def handle(self, batch: Sequence[Delivery]) -> None:
        """Decide every message of ``batch`` and settle the outcomes: its triage, its
        calls (waited for up to ``SENTINEL_SHUTDOWN_TIMEOUT_S``), one round trip."""
        self._decide(batch)
        deadline = time.monotonic() + self.settings.shutdown_timeout_s
        self._settle(self.calls.collect_until(deadline))

    def _recovery_due(self) -> bool:
        """Recovery runs at most every :data:`RECOVERY_INTERVAL_S`: a pass per finished
        call (many calls in flight) would otherwise cost the server an XPENDING each."""
        now = time.monotonic()
        if now < self._next_recovery:
            return False
        self._next_recovery = now + RECOVERY_INTERVAL_S
        return True

    def _take(self, deliveries: Sequence[Delivery], field: str) -> None:
        """Count what was read or recovered (``field``) and decide it."""
        self.tally[field] += len(deliveries)
        self._decide(deliveries)

    def _decide(self, deliveries: Sequence[Delivery]) -> None:
        """Triage: decided outcomes to the outbox, the rest to the calls. A copy of a key
        whose effect waits in the outbox shares it (its commit acknowledges it)."""
        if deliveries:
            decided, due = self.triage(deliveries)
            self.outbox.extend(decided)
            if len(self.outbox):
                due = self._share_decided(due)
            self.calls.submit(due)  # claimed by the triage when the calls are paid
            if self.claims is not None:
                self.claims.keep(self.calls.keys_in_hand())

    def _flush_due(self) -> None:
        """Settle the outbox once no call runs, every :data:`FLUSH_INTERVAL_S` while calls
        run, or once it holds as many outcomes as the limit in force: what completes
        together shares one round trip, but a finished message is lag until it is
        acknowledged, so a fast worker never holds more of them than calls (its published
        holding) while the producers pace on that lag."""
        if not len(self.outbox):
            return
        due = time.monotonic() - self.outbox.last_flush >= FLUSH_INTERVAL_S
        due = due or len(self.outbox) >= self.calls.limit.limit
        if due or not self.calls.running or self.stop.is_set():
            self.tally.update(self.outbox.flush())

    def _share_decided(self, due: list[Prepared]) -> list[Prepared]:
        effects = self.outbox.effects()
        for prepared in [p for p in due if p.natural_key in effects]:
            effect = effects[prepared.natural_key]
            self.outbox.add(Commit(prepared.delivery, prepared.natural_key, effect))
        return [p for p in due if p.natural_key not in effects]

    def _settle(self, outcomes: Sequence[Outcome]) -> None:
        """Buffer ``outcomes`` and settle the outbox (one round trip), unless empty."""
        self.outbox.extend(outcomes)
        if len(self.outbox):
            self.tally.update(self.outbox.flush())

    def _hand_back(self, prepared: Sequence[Prepared]) -> None:
        if prepared:
            self.outbox.hand_back([p.delivery for p in prepared])
            self.tally["handed_back"] += len(prepared)

    def _in_hand_ids(self) -> set[str]:
        """Messages we hold that are being handled: in the calls, waiting on a claim, or
        decided and not yet settled."""
        waiting = set(self.claims.waiting) if self.claims is not None else set()
        return self.calls.in_hand_ids() | self.outbox.ids() | waiting

    def held(self) -> int:
        """Messages in hand and not decided: in the calls or waiting on a claim."""
        return self.calls.held() + (len(self.claims.waiting) if self.claims else 0)

    def take_back(self) -> list[Prepared]:
        """Everything in hand but the calls in progress (a stop hands it back)."""
        return self.calls.take_back() + (self.claims.take_back() if self.claims else [])

    def report(self) -> IterationReport:
        """The tally since the last report, as a report (added to ``totals``)."""
        report = IterationReport(**self.tally)
        self.tally.clear()
        self.totals += report
        self.metrics.set_gauge("in_flight", self.held())
        return report

    def _block(self, waiting: bool) -> int | None:
        """How long the read may block (:func:`read_block`)."""
        due_in = self.calls.next_due_in(time.monotonic())
        return read_block(self.block_ms, waiting or self._burst, due_in)

    def _drained(self) -> bool:
        """Nothing uncommitted, nothing in hand, no message pending on us (burst may end)."""
        if len(self.outbox) or self.held():
            return False
        mine = self.client.xpending_range(
            self.keys.stream, self.keys.group, "-", "+", 1, consumername=self.consumer
        )
        return not mine

    def _busy(self, prepared: Prepared, retry_after_s: float) -> None:
        """A call refused as busy (its message parked): counted; logged at DEBUG only."""
        self.tally["busy"] += 1
        self.metrics.inc("busy")
        if log.isEnabledFor(logging.DEBUG):
            details = {"message_id": prepared.delivery.id, "retry_after_s": retry_after_s}
            self.log.debug("busy", extra=details)

    def _give_up(self) -> None:
        """The hang watchdog gives the worker up: see ``Stopping.give_up``."""
        self.stopping.give_up()

    # --- name, healing ---------------------------------------------------------------------
    def _lose_name(self) -> None:
        """Another process took our consumer name: stop (exit 2) rather than share it."""
        self.name_taken = True
        self.stop.set()

    def _heal(self, exc: Exception) -> None:
        """Recreate a group deleted under us (stream deleted, FLUSHALL).

        Healing meets Redis as it is: a group it cannot recreate yet (a full server, Redis
        gone again) is waited out like any outage, and the next pass, meeting NOGROUP
        again, heals once more. It never raises a Redis error.
        """
        self.log.warning("group_missing", extra={"error": str(exc)})
        self.outbox.clear()  # their deliveries vanished with the group
        try:
            ensure_group(self.client, self.keys)
            self.lease.acquire()
        except LeaseHeldError as held:  # our lease lapsed meanwhile and the name was taken
            self.log.error("lease_taken", extra={"error": str(held)})
            self._lose_name()
        except Exception as heal_exc:
            if self.outages.met(heal_exc) == "bug":
                raise
        else:
            self.tally["healed"] += 1


def read_block(block_ms: int, waiting: bool, due_in_s: float | None) -> int | None:
    """How long a read may block (None: not at all): not while calls or recovered
    messages wait (``waiting``, or a burst run), not with ``--block-ms 0``, never past
    :data:`MAX_BLOCK_MS` (recovery runs at least that often) nor past the moment a parked
    message is due (``due_in_s``)."""
    if waiting or block_ms == 0:
        return None
    block = min(block_ms, MAX_BLOCK_MS)
    return block if due_in_s is None else max(1, min(block, int(due_in_s * 1000)))


__all__ = ["Consumer", "Delivery", "IterationReport"]
