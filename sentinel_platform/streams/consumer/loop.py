"""The consumer loop: recover, read, process, commit in batches, publish lag.

One pass, :meth:`Consumer.iteration`, returns an :class:`IterationReport`::

    flush anything not yet committed (after a Redis outage)
    take back a lost read           # a read whose reply was lost: its batch, from the PEL
    recovery.step()                 # claims due messages: dead workers', our own failures
    XREADGROUP > COUNT n BLOCK b    # sent once (group_read.py); b <= 1 s, woken at a death
    look up the batch               # dead-lettered before? committed keys? one round trip each
    process each message            # parse -> (DLQ | process -> effect | failure)
    commit the batch in pipelines   # one EVALSHA per batch, one round trip per flush
    write the lag key (rate-limited; the heartbeat writes it too)

With ``SENTINEL_WORKER_CONCURRENCY`` = C > 1 the processor calls run on C threads
(``work_pool.py``): a pass collects finished calls, commits them, and recovers and reads
only as many messages as threads are free, so a worker holds at most C messages and
every one of them is in its PEL (counted in the lag, recovered if it dies). Copies of a
key in flight make one call; the worker's own recovery never claims a message it is
processing. See ``docs/concurrency.md``.

:meth:`Consumer.run` repeats it: as a service (``burst=False``, the worker process) until
asked to stop, or in burst mode (``burst=True``) until a pass finds nothing to do, nothing
is left uncommitted and we hold no pending message, so the loop can be driven in-process
and return on its own. Both share the start-up, the error handling and the shutdown.

Outcomes of a message, decided before the call (:meth:`Consumer._prepare`) or by it
(:meth:`Consumer._call`):

* bytes that are not UTF-8 (``undecodable.py``) or ``SchemaError`` (from ``parse``, or
  ``process`` rejecting the content) -> dead letter ``invalid_message`` at once, no
  retries, with the exact payload;
* dead-lettered before (a group re-created at 0 reads its history again) or its natural
  key committed before -> acknowledged, no call;
* a redelivery whose recorded processor calls reach the delivery limit -> dead letter
  ``max_deliveries_exceeded`` *unprocessed*, with the last error (see ``attempts.py``);
* any other exception (processor or parser bug) -> stays pending on us, its error
  recorded; recovery hands it back after ``SENTINEL_RETRY_BACKOFF_MS`` (XCLAIM to
  ourselves bumps the delivery count); an error no branch expects, anywhere in a pass,
  is logged with its traceback (``iteration_failed``) and the pass's messages are
  retried the same way: no single message ends the process;
* otherwise the effect is committed atomically with its marker and XACK
  (``idempotency.py``).

Commits are buffered and flushed when the batch ends or every ``FLUSH_INTERVAL_S``,
so fast processors pay one round trip per batch and slow ones still acknowledge each
message promptly. Each outcome's replies come back to it by structure
(``tagged_pipeline.py``), never by counting the commands a helper queues. A failed flush
(connection loss) keeps the outcomes in memory and retries them with backoff; since every
commit is idempotent, nothing is lost or doubled. Other Redis errors (OOM, a key of the
wrong type) are logged and retried the same way: a worker never crash-loops. A group
deleted under the worker (NOGROUP) is recreated at id 0 (:meth:`Consumer._heal`); if
that fails too (a full server), healing waits like an outage and is tried again. Start-up
(scripts, group, lease) waits the same way, still stoppable; only a refusal no wait can
change (an ACL denying a command, an unknown command) stops it (:class:`RedisRefusedError`,
exit status 2). The lag key and the peaks record are side writes: their failure is
logged (``side_write_failed``) and never holds up the loop or the lease heartbeat.

On stop (SIGTERM/SIGINT) the message in hand (with a pool: the calls in progress, until
``SENTINEL_SHUTDOWN_TIMEOUT_S``) is finished, the outcomes are committed, and the
unprocessed rest of the batch is handed back: moved to the lease-less consumer
:data:`HANDBACK_CONSUMER` with an idle time far past every threshold and its delivery
count restored, so any live worker (or the next one to start) claims it on its next
recovery step. Stopping therefore takes block time + one message, not a whole batch,
and leaves nothing pending on the stopped consumer, which then leaves the group.

Outcomes Redis will not take while stopping (down, full, a key of the wrong type) are
retried until ``SENTINEL_SHUTDOWN_TIMEOUT_S`` (default 10 s) has passed; then the worker
gives them up with one ``stopped_uncommitted`` line, releases its lease if it can and
exits with :data:`EXIT_UNCOMMITTED`. Their messages stay pending on the stopped consumer,
which has no lease any more, so the survivors recover them; commits are idempotent.

Exit status of :meth:`Consumer.run` (the worker process): 0 stopped cleanly;
:data:`EXIT_NAME_IN_USE` (2) another live process uses the consumer name;
:data:`EXIT_UNCOMMITTED` (3) stopped with outcomes it could not commit. The hang watchdog
exits with ``EXIT_HUNG`` (70, ``watchdog.py``) and start-up errors with 2 (``runtime.py``).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any, Literal, TypeVar

import redis

from sentinel_platform.schemas import DeadLetterReason, SchemaError, describe_error
from sentinel_platform.settings import Settings
from sentinel_platform.streams.consumer.attempts import (
    RECORD_CALL,
    AttemptRecord,
    attempt_records,
    queue_error,
    queue_read_attempts,
    read_attempts,
    record_call,
)
from sentinel_platform.streams.consumer.dead_letter import (
    ALREADY_DEAD_LETTERED,
    DEAD_LETTER,
    NO_ERROR_RECORDED,
    already_dead_lettered,
    build_dead_letter,
    queue_dead_check,
    queue_dead_letter,
    was_dead_lettered,
)
from sentinel_platform.streams.consumer.entry_age import EXPIRED_MARKER_ERROR, entry_too_old
from sentinel_platform.streams.consumer.group import ensure_group
from sentinel_platform.streams.consumer.group_read import GroupReader
from sentinel_platform.streams.consumer.idempotency import (
    COMMIT_EFFECTS,
    CommitItem,
    CommitLimits,
    InvalidEffectError,
    check_effect,
    check_natural_key,
    commit_statuses,
    queue_commits,
)
from sentinel_platform.streams.consumer.lease import (
    EXIT_NAME_IN_USE,
    Heartbeat,
    Lease,
    LeaseHeldError,
    heartbeat_interval_s,
)
from sentinel_platform.streams.consumer.metrics import Metrics
from sentinel_platform.streams.consumer.processor import Effect, Processor
from sentinel_platform.streams.consumer.recovery import (
    CLAIM,
    PRUNE,
    Delivery,
    Recovery,
    pairs_to_dict,
)
from sentinel_platform.streams.consumer.watchdog import HangWatchdog, InHand
from sentinel_platform.streams.consumer.work_pool import WorkPool
from sentinel_platform.streams.plumbing.backoff import Backoff
from sentinel_platform.streams.plumbing.connection import (
    FAILOVER_ERRORS,
    TRANSIENT_ERRORS,
    RedisClient,
    reset_connections,
)
from sentinel_platform.streams.plumbing.keys import StreamKeys, attempt_key
from sentinel_platform.streams.plumbing.scripts import with_scripts
from sentinel_platform.streams.plumbing.tagged_pipeline import TaggedPipeline
from sentinel_platform.streams.plumbing.undecodable import undecodable_error
from sentinel_platform.streams.pool.lag import measure_lag, queue_lag_key
from sentinel_platform.streams.pool.peaks import queue_record_lag
from sentinel_platform.streams.pool.retention import Retention

log = logging.getLogger(__name__)
T = TypeVar("T")

#: Longest a read blocks, so recovery runs at least once a second on an idle worker.
MAX_BLOCK_MS = 1000
#: Buffered outcomes are committed at least this often while a batch is processed.
FLUSH_INTERVAL_S = 0.05
#: Lag key writes from the loop are at most this frequent (the heartbeat adds its own).
LAG_WRITE_INTERVAL_S = 0.1
#: Idle time given to handed-back messages: past every claim threshold.
HANDBACK_IDLE_MS = 10**10
#: Holder of handed-back messages; it never has a lease, so every worker may claim them.
HANDBACK_CONSUMER = "sentinel-handback"
#: After a lost read, how many batches' worth of our pending entries are looked through.
LOST_READ_SCAN = 10
#: In burst mode, how long an idle pass waits while our own failures await their retry.
BURST_POLL_S = 0.02
BACKOFF_START_S = 0.1
BACKOFF_CAP_S = 5.0
ALL_SCRIPTS = (COMMIT_EFFECTS, DEAD_LETTER, CLAIM, PRUNE, RECORD_CALL)
#: Exit status of a worker that stopped with outcomes Redis would not take before
#: ``SENTINEL_SHUTDOWN_TIMEOUT_S``: their messages stay pending for the survivors.
EXIT_UNCOMMITTED = 3


class RedisRefusedError(RuntimeError):
    """Redis refuses a command the worker needs, and no wait can change it (ACL, a command
    the server does not know): start-up stops (exit status 2)."""


def is_configuration_error(exc: redis.ResponseError) -> bool:
    """A refusal of the command itself, not of its data or the server's state right now."""
    if isinstance(exc, redis.exceptions.NoPermissionError):
        return True
    return "unknown command" in str(exc).lower()


@dataclass(slots=True)
class Commit:
    delivery: Delivery
    natural_key: str
    effect: Effect


@dataclass(slots=True)
class DeadLetterOp:
    delivery: Delivery
    reason: DeadLetterReason
    error: str


@dataclass(slots=True)
class Failure:
    delivery: Delivery
    error: str


@dataclass(slots=True)
class Acknowledge:
    """Acknowledged without a processor call: its natural key was committed already
    (``duplicate``) or the message was dead-lettered before (``already_dead_lettered``)."""

    delivery: Delivery
    why: Literal["duplicate", "already_dead_lettered"]
    natural_key: str = ""


@dataclass(slots=True)
class Prepared:
    """A message parsed and due for a processor call (no outcome decided yet)."""

    delivery: Delivery
    message: Any
    natural_key: str
    #: seconds spent parsing, counted in the message's processing time
    parse_s: float = 0.0


Outcome = Commit | DeadLetterOp | Failure | Acknowledge


@dataclass(frozen=True, slots=True)
class IterationReport:
    """What one pass of the loop handled; reports add up (``Consumer.totals``)."""

    #: new messages read (``>``)
    read: int = 0
    #: messages claimed by recovery: dead consumers', handed-back ones, our own retries
    recovered: int = 0
    #: effects committed (with marker and XACK)
    committed: int = 0
    #: acknowledged without a second effect: their natural key already had one
    duplicates: int = 0
    #: moved to the DLQ with their payload
    dead_lettered: int = 0
    #: processing failed: left pending on us for a retry
    failed: int = 0
    #: settled elsewhere meanwhile (no longer pending): nothing written
    stale: int = 0
    #: unprocessed on stop, made claimable by any worker
    handed_back: int = 0
    #: consumer groups recreated after they vanished (NOGROUP)
    healed: int = 0

    @property
    def handled(self) -> int:
        """Messages this pass was handed (read or claimed)."""
        return self.read + self.recovered

    @property
    def idle(self) -> bool:
        """Nothing handed to us and nothing settled: the pass found no work."""
        settled = self.committed + self.duplicates + self.dead_lettered + self.failed
        return self.handled == 0 and settled + self.stale == 0

    def __add__(self, other: IterationReport) -> IterationReport:
        return IterationReport(
            **{f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)}
        )


class Consumer:
    """One worker's membership in one consumer group."""

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
    ) -> None:
        self.client = client
        self.keys = keys
        self.processor = processor
        self.settings = settings
        self.consumer = consumer
        self.metrics = metrics
        self._observe_processing = metrics.observer("processing_seconds")
        self.stop = stop or threading.Event()
        self.count = count or settings.read_count
        self.block_ms = settings.block_ms if block_ms is None else block_ms
        self.log_fields = {"stream": keys.stream, "group": keys.group, "consumer": consumer}
        self.limits = CommitLimits(
            settings.results_maxlen, settings.idempotency_ttl_s, settings.recent_transactions_size
        )
        self.recovery = Recovery(
            client,
            keys,
            consumer,
            lease_ttl_ms=settings.lease_ttl_ms,
            reclaim_idle_ms=settings.reclaim_idle_ms,
            retry_backoff_ms=settings.retry_backoff_ms,
            metrics=metrics,
        )
        self.lease = Lease(
            client, keys, consumer, settings.lease_ttl_ms, with_link=settings.connection_liveness
        )
        self.retention = Retention(client, keys, settings, self.log_fields)
        self.recovery.lease_value = self.lease.value  # claim only while the lease is ours
        self.recovery.in_hand = self._in_hand_ids  # our calls in flight are not retries
        self.reader = GroupReader(client, keys, consumer, self.log_fields)
        self.recovery.watch.on_death = self.reader.wake  # a death cuts our blocked read short
        self._name_taken = False
        self._lease_taken = False  # by start(): what a start-up cut short gives back
        self.in_hand = InHand()
        self.watchdog = HangWatchdog(
            self.in_hand, settings.hang_timeout_ms, self._give_up, self.log_fields
        )
        self.heartbeat = Heartbeat(
            self.lease,
            heartbeat_interval_s(settings.lease_ttl_ms, settings.lag_key_ttl_s),
            self._on_beat,
            self.log_fields,
            on_taken=self._lose_name,
            side_writes=self.write_lag,  # beside the refresh, never before it
            on_unreachable=self.recovery.grace.outage,  # see recovery_grace.py
        )
        self.concurrency = settings.worker_concurrency
        #: the threads of processor calls (None with a concurrency of 1: calls run inline)
        self.pool: WorkPool[Prepared, Outcome] | None = None
        self._in_flight: dict[str, Prepared] = {}  # submitted calls by message id
        self._followers: dict[str, list[Prepared]] = {}  # per key in flight: its copies
        self._outbox: list[Outcome] = []
        self._last_flush = time.monotonic()
        self._next_lag_write = 0.0
        self._backoff = Backoff(BACKOFF_START_S, BACKOFF_CAP_S)
        self._burst = False
        self._uncertain_read = False
        self._started = False
        self._tally: Counter[str] = Counter()
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
        self._lease_taken = True
        self._side_write_lag()  # a worker that is up says so at once, before its first read
        self.heartbeat.start()
        if self.concurrency > 1 and self.pool is None:
            self.pool = WorkPool(self.concurrency, self._call, name="processor")
        self._started = True
        log.info(
            "started",
            extra={
                **self.log_fields,
                "count": self.count,
                "block_ms": self.block_ms,
                "concurrency": self.concurrency,
            },
        )

    def run(self, burst: bool = False) -> int:
        """Consume; the exit status of the worker process.

        ``burst=False`` (the worker process): until asked to stop. ``burst=True``: also
        return once a pass found no work, nothing is left uncommitted and no message is
        pending on us (messages of live or not-yet-due holders are not waited for). Reads
        never block in burst mode. Both start (unless :meth:`start` was called already) and
        shut down the same way.
        """
        self._burst = burst
        if not self._started:
            self._retrying(self.start)
        if not self._started:  # stopped while waiting for Redis at start-up
            self._abandon_start()
            return 0
        while not self.stop.is_set():
            report = self._guarded(self.iteration)
            if burst and report is not None and report.idle:
                drained = self._guarded(self._drained)
                if drained:
                    break
                if drained is not None:
                    self.stop.wait(BURST_POLL_S)  # our own failures wait for their retry
        return self.shutdown()

    def _guarded(self, action: Callable[[], T]) -> T | None:
        """``action()``; Redis errors are handled (backoff, reconnect, heal), never raised."""
        try:
            result = action()
        except FAILOVER_ERRORS as exc:
            self._failover(exc)
        except TRANSIENT_ERRORS as exc:
            self._outage(exc)
        except redis.ResponseError as exc:
            if not self._heal(exc):
                self._outage(exc)  # e.g. OOM or a wrong key type: wait, never crash-loop
        except Exception as exc:  # a bug met on one message must not end the process
            self._unexpected(exc)
        else:
            self._reached()
            return result
        return None

    def iteration(self) -> IterationReport:
        """One pass: flush leftovers, recover, read a batch, process and commit it."""
        if self.pool is not None:
            return self._pool_iteration()
        if self._outbox:
            self.flush()
        if self._uncertain_read:  # before recovery, which would count another delivery
            self._take_back_lost_read()
        recovered = self.recovery.step(self.count)
        self._tally["recovered"] += len(recovered)
        if recovered:
            self.handle(recovered)
        if self.stop.is_set():
            return self._report()
        block = self._block(bool(recovered))
        batch = self._read(block)
        self._tally["read"] += len(batch)
        if batch:
            self.handle(batch)
        elif block is None and not recovered and not self._burst:
            self.stop.wait(0.05)  # --block-ms 0: poll, but do not spin
        self._maybe_write_lag()
        self.retention.maybe_trim()  # at most once per SENTINEL_STREAM_RETENTION_INTERVAL_S
        return self._report()

    def _pool_iteration(self) -> IterationReport:
        """One pass with calls on the pool's threads: collect finished calls, commit,
        recover and read only as many messages as there are free threads, then wait a
        little for a call to finish when nothing else is to be done."""
        self._collect()
        if self._outbox:
            self.flush()
        if self._uncertain_read:
            self._take_back_lost_read()
        recovered = self.recovery.step(min(self.count, self._free())) if self._free() else []
        self._tally["recovered"] += len(recovered)
        if recovered:
            self.handle(recovered)
        batch: list[Delivery] = []
        if self._free() and not self.stop.is_set():
            busy = bool(recovered) or bool(self._in_flight)
            batch = self._read(self._block(busy), min(self.count, self._free()))
            self._tally["read"] += len(batch)
            if batch:
                self.handle(batch)
        if self._in_flight and not batch:
            self._collect(FLUSH_INTERVAL_S)  # wait for a call rather than spin
        elif not batch and not recovered and self._block(False) is None and not self._burst:
            self.stop.wait(0.05)  # --block-ms 0: poll, but do not spin
        if self._outbox:
            self.flush()
        self._maybe_write_lag()
        self.retention.maybe_trim()
        return self._report()

    def _in_hand_ids(self) -> set[str]:
        """Messages we hold that are being handled: in flight, waiting on a copy's call,
        or decided and not yet committed."""
        ids = set(self._in_flight) | {outcome.delivery.id for outcome in self._outbox}
        ids |= {p.delivery.id for copies in self._followers.values() for p in copies}
        return ids

    def _free(self) -> int:
        """Threads of the pool with no call to run."""
        return self.concurrency - len(self._in_flight)

    def _read(self, block: int | None, count: int | None = None) -> list[Delivery]:
        """New messages (``XREADGROUP ... >``), sent once: a lost reply is never re-sent.

        Until the reply is in hand the read is uncertain: it may have delivered a batch
        that only the PEL knows of (:meth:`_take_back_lost_read` processes it).
        """
        self._uncertain_read = True
        reply = self.reader.read(count or self.count, block)
        self._uncertain_read = False
        return _deliveries(reply)

    def _take_back_lost_read(self) -> None:
        """Process what a read whose reply was lost delivered, as the first delivery it is.

        Our pending messages that are first deliveries, not in hand and not failures
        waiting out their retry backoff (those have an error record) can only come from
        that read. Their bodies are fetched with XRANGE: re-reading them with
        ``XREADGROUP ... 0`` would count a delivery the processor never saw.
        """
        held = self.client.xpending_range(
            self.keys.stream,
            self.keys.group,
            "-",
            "+",
            LOST_READ_SCAN * self.count,
            consumername=self.consumer,
        )
        in_hand = self._in_hand_ids()
        candidates = [
            str(entry["message_id"])
            for entry in held
            if entry["times_delivered"] == 1 and entry["message_id"] not in in_hand
        ]
        failed = read_attempts(self.client, self.keys, candidates)
        lost = [m for m in candidates if not (failed.get(m) and failed[m].last_error)]
        pipe = self.client.pipeline(transaction=False)
        for message_id in lost:
            pipe.xrange(self.keys.stream, message_id, message_id)
        bodies = [Delivery(i, f or {}, 1) for rows in pipe.execute() for i, f in rows]
        self._uncertain_read = False
        log.warning("uncertain_read", extra={**self.log_fields, "taken_back": len(bodies)})
        if bodies:
            self._tally["read"] += len(bodies)
            self.handle(bodies)

    def _report(self) -> IterationReport:
        """The tally since the last report, as a report (added to ``totals``)."""
        report = IterationReport(**self._tally)
        self._tally.clear()
        self.totals += report
        return report

    def _block(self, busy: bool) -> int | None:
        if busy or self.block_ms == 0 or self._burst:
            return None
        return min(self.block_ms, MAX_BLOCK_MS)

    def _drained(self) -> bool:
        """Nothing uncommitted and no message pending on us (burst mode may end)."""
        if self._outbox or self._in_flight:
            return False
        mine = self.client.xpending_range(
            self.keys.stream, self.keys.group, "-", "+", 1, consumername=self.consumer
        )
        return not mine

    # --- processing ------------------------------------------------------------------------
    def handle(self, batch: Sequence[Delivery]) -> None:
        """Decide every message of the batch and commit the outcomes in pipelines.

        No processor is called for what is settled already: the messages dead-lettered
        before (a group re-created at 0 reads them again) and those whose natural key was
        committed before are acknowledged without a call. A batch of first deliveries
        (the hot path) is parsed first and looked up in one round trip; a batch with
        redeliveries reads their attempt records first, because a redelivery's call is
        counted (and its delivery limit checked) before it is parsed. The rest are
        processed here, one by one, or with a concurrency above 1 handed to the pool's
        threads; copies of one key make one call.
        """
        if any(delivery.deliveries > 1 for delivery in batch):
            due = self._sort_out_redelivered(batch)
        else:
            due = self._sort_out_first(batch)
        if self.pool is None:
            self._process_here(due)
        else:
            self._submit(due)

    def _sort_out_first(self, batch: Sequence[Delivery]) -> list[Prepared]:
        """First deliveries: parse, then one round trip for dead letters and markers."""
        parsed = [self._prepare(delivery, None) for delivery in batch]
        ids = [delivery.id for delivery in batch]
        names = list(dict.fromkeys(p.natural_key for p in parsed if isinstance(p, Prepared)))
        pipe = self.client.pipeline(transaction=False)
        queue_dead_check(pipe, self.keys, ids)
        if names:
            # MGET by name: a cluster pipeline refuses its mget(), yet routes this call by
            # its keys, which share the stream's hash slot.
            pipe.execute_command("MGET", *(self.keys.marker(name) for name in names))
        replies = pipe.execute()
        dead = already_dead_lettered(ids, replies[0])
        committed = _marked(names, replies[1]) if names else set()
        due: list[Prepared] = []
        for delivery, prepared in zip(batch, parsed, strict=True):
            if delivery.id in dead:  # read again (group re-created): never processed twice
                self._outbox.append(Acknowledge(delivery, "already_dead_lettered"))
            else:
                self._sort(prepared, committed, due)
        return due

    def _sort_out_redelivered(self, batch: Sequence[Delivery]) -> list[Prepared]:
        """A batch with redeliveries: their records first, then parse, then the markers."""
        records, dead = self._look_up(batch)
        parsed: list[Prepared | Outcome] = []
        for delivery in batch:
            if delivery.id in dead:  # read again (group re-created): never processed twice
                self._outbox.append(Acknowledge(delivery, "already_dead_lettered"))
            else:
                parsed.append(self._prepare(delivery, records.get(delivery.id)))
        committed = self._committed_keys([p for p in parsed if isinstance(p, Prepared)])
        due: list[Prepared] = []
        for prepared in parsed:
            self._sort(prepared, committed, due)
        return due

    def _sort(self, prepared: Prepared | Outcome, committed: set[str], due: list[Prepared]) -> None:
        """An outcome decided before the call goes to the outbox; a committed key is
        acknowledged without a call; the rest is due for its call."""
        if not isinstance(prepared, Prepared):
            self._outbox.append(prepared)
        elif prepared.natural_key in committed:
            ack = Acknowledge(prepared.delivery, "duplicate", prepared.natural_key)
            self._outbox.append(ack)
        else:
            due.append(prepared)

    def _look_up(self, batch: Sequence[Delivery]) -> tuple[dict[str, AttemptRecord], set[str]]:
        """One round trip: the attempt records of the redeliveries, and which messages of
        the batch were dead-lettered already."""
        ids = [d.id for d in batch]
        redelivered = [d.id for d in batch if d.deliveries > 1]
        pipe = self.client.pipeline(transaction=False)
        queue_dead_check(pipe, self.keys, ids)
        queue_read_attempts(pipe, self.keys, redelivered)
        dead_reply, *attempt_replies = pipe.execute()
        return attempt_records(redelivered, attempt_replies), already_dead_lettered(ids, dead_reply)

    def _committed_keys(self, due: Sequence[Prepared]) -> set[str]:
        """The natural keys of ``due`` whose marker exists: one MGET (every marker of a
        stream shares its hash slot on a cluster)."""
        if not due:
            return set()
        names = list(dict.fromkeys(p.natural_key for p in due))
        return _marked(names, self.client.mget([self.keys.marker(name) for name in names]))

    def _prepare(self, delivery: Delivery, record: AttemptRecord | None) -> Prepared | Outcome:
        """Everything decided before a processor call: undecodable, too old, past the
        delivery limit, invalid; else the parsed message and its natural key."""
        undecodable = undecodable_error(delivery.fields)
        if undecodable is not None:  # its bytes are kept exactly, as base64, in the DLQ
            return DeadLetterOp(delivery, "invalid_message", undecodable)
        if entry_too_old(delivery.id, self.settings):  # retention off: see entry_age.py
            return DeadLetterOp(delivery, "expired_marker", EXPIRED_MARKER_ERROR)
        if delivery.deliveries > 1:
            # The first delivery counts as one call: it is never recorded (hot path).
            calls = (record or AttemptRecord()).calls
            if calls + 1 >= self.settings.reclaim_delivery_limit:
                error = (record.last_error if record else None) or NO_ERROR_RECORDED
                return DeadLetterOp(delivery, "max_deliveries_exceeded", error)
            # Recorded before parsing and the call: a call that kills the worker counts.
            self._record_call(delivery, calls)
        started = time.perf_counter()
        try:
            message = self.processor.parse(delivery.fields)
            natural_key = self.processor.natural_key(message)
            check_natural_key(natural_key)  # a plug-in's bug: retried, never sent as a key
        except SchemaError as exc:
            self._observe_processing(time.perf_counter() - started)
            return DeadLetterOp(delivery, "invalid_message", describe_error(exc))
        except Exception as exc:  # a parser error never kills the worker
            self._observe_processing(time.perf_counter() - started)
            return self._failed(delivery, exc)
        return Prepared(delivery, message, natural_key, time.perf_counter() - started)

    def _process_here(self, due: Sequence[Prepared]) -> None:
        """Concurrency 1: call the processor for each message in turn on this thread."""
        effects: dict[str, Effect] = {}  # copies of one key in the batch: one call
        for index, prepared in enumerate(due):
            if self.stop.is_set():
                self.flush()
                self.hand_back([p.delivery for p in due[index:]])
                self._tally["handed_back"] += len(due) - index
                return
            effect = effects.get(prepared.natural_key)
            if effect is not None:
                self._outbox.append(Commit(prepared.delivery, prepared.natural_key, effect))
                continue
            outcome = self._call(prepared)
            if isinstance(outcome, Commit):
                effects[prepared.natural_key] = outcome.effect
            self._outbox.append(outcome)
            if time.monotonic() - self._last_flush >= FLUSH_INTERVAL_S:
                self.flush()
        self.flush()

    def _submit(self, due: Sequence[Prepared]) -> None:
        """Concurrency above 1: hand each message to the pool; a copy of a key already
        in flight waits for that call (:meth:`_collect`) instead of making its own."""
        assert self.pool is not None
        for prepared in due:
            key = prepared.natural_key
            if key in self._followers:
                self._followers[key].append(prepared)
                continue
            self._followers[key] = []
            self._in_flight[prepared.delivery.id] = prepared
            self.pool.submit(prepared)

    def _collect(self, wait_s: float = 0.0) -> None:
        """Move finished calls to the outbox; a call's copies share its committed effect
        (the commit acknowledges them as duplicates) or, if it did not commit, are
        processed on their own."""
        if self.pool is None:
            return
        for prepared, outcome in self.pool.results(wait_s):
            if self._in_flight.pop(prepared.delivery.id, None) is None:
                continue  # handed back while stopping: its outcome is not ours to commit
            self._outbox.append(outcome)
            copies = self._followers.pop(prepared.natural_key, [])
            if isinstance(outcome, Commit):
                for copy in copies:
                    self._outbox.append(Commit(copy.delivery, copy.natural_key, outcome.effect))
            elif copies:
                self._submit(copies)
        self.metrics.set_gauge("in_flight", len(self._in_flight))

    def _call(self, prepared: Prepared) -> Outcome:
        """One processor call and its outcome; never raises (the pool's threads run it)."""
        delivery = prepared.delivery
        self.in_hand.take(delivery.id)
        started = time.perf_counter()
        try:
            if self.settings.simulate_latency_ms:
                time.sleep(self.settings.simulate_latency_ms / 1000)
            effect = self.processor.process(prepared.message)
            check_effect(effect.result, effect.recent)  # unsendable: a processor failure
            if effect.natural_key != prepared.natural_key:  # meant for another message
                raise InvalidEffectError(
                    f"the effect's natural key {effect.natural_key!r} is not the message's "
                    f"{prepared.natural_key!r}"
                )
        except SchemaError as exc:
            return DeadLetterOp(delivery, "invalid_message", describe_error(exc))
        except Exception as exc:  # a processor error never kills the worker
            return self._failed(delivery, exc)
        finally:
            self.in_hand.drop()
            self._observe_processing(prepared.parse_s + time.perf_counter() - started)
        return Commit(delivery, prepared.natural_key, effect)

    def _record_call(self, delivery: Delivery, calls: int) -> None:
        """Count a redelivery's call before it is made (safe to send twice: see
        ``attempts.py``); ``calls``: the calls recorded before this one."""
        settings = self.settings
        record_call(
            self.client, self.keys, delivery.id, delivery.deliveries, settings.idempotency_ttl_s
        )
        if delivery.claimed_from == self.consumer:
            log.info(
                "retrying",
                extra={
                    **self.log_fields,
                    "message_id": delivery.id,
                    "deliveries": delivery.deliveries,
                    "call": calls + 2,
                },
            )

    def _failed(self, delivery: Delivery, exc: Exception) -> Failure:
        error = describe_error(exc)
        self.metrics.inc("retried")
        log.warning(
            "processing_failed",
            extra={
                **self.log_fields,
                "message_id": delivery.id,
                "deliveries": delivery.deliveries,
                "error": error,
                "retry_after_ms": self.settings.retry_backoff_ms,
            },
        )
        return Failure(delivery, error)

    # --- committing ---------------------------------------------------------------------------
    def flush(self) -> None:
        """Commit buffered outcomes in one pipeline; on failure they stay buffered."""
        self._last_flush = time.monotonic()
        if not self._outbox:
            return
        outbox = list(self._outbox)
        started = time.perf_counter()
        settled = with_scripts(self.client, ALL_SCRIPTS, lambda: self._send(outbox))
        self.metrics.observe_commit(time.perf_counter() - started)
        del self._outbox[: len(outbox)]
        applied, debug = 0, log.isEnabledFor(logging.DEBUG)
        for outcome, reply in settled:
            if reply == "applied":  # the hot path: counted once per flush
                applied += 1
                if debug and isinstance(outcome, Commit):
                    details = {"message_id": outcome.delivery.id, **outcome.effect.log_fields}
                    log.debug("processed", extra={**self.log_fields, **details})
            else:
                self._tally[self._settled(outcome, reply)] += 1
        if applied:
            self.metrics.inc("processed", applied)
            self._tally["committed"] += applied

    def _send(self, outbox: Sequence[Outcome]) -> list[tuple[Outcome, Any]]:
        """One pipeline: the batch's commits in few script calls, dead letters, errors.

        Each outcome gets the reply of its own commands, matched by structure: a commit's
        status from its script call, a dead letter's from its script call; a failure's
        error record needs no reply.
        """
        commits = [o for o in outbox if isinstance(o, Commit)]
        pipe: TaggedPipeline[Sequence[Outcome]] = TaggedPipeline(
            self.client.pipeline(transaction=False)
        )
        if commits:
            items = [_commit_item(o) for o in commits]
            pipe.queue(commits, lambda p: queue_commits(p, self.keys, items, self.limits))
        for outcome in outbox:
            if isinstance(outcome, DeadLetterOp):
                pipe.queue([outcome], self._letter_queuer(outcome))
            elif isinstance(outcome, Failure):
                pipe.queue([outcome], self._error_queuer(outcome))
            elif isinstance(outcome, Acknowledge):
                pipe.queue([outcome], self._ack_queuer(outcome))
        settled: list[tuple[Outcome, Any]] = []
        for queued, replies in pipe.execute():
            settled.extend(zip(queued, _settled_replies(queued, replies), strict=True))
        return settled

    def _letter_queuer(self, outcome: DeadLetterOp) -> Callable[[Any], None]:
        delivery = outcome.delivery
        letter = build_dead_letter(
            self.keys,
            delivery.id,
            delivery.fields,
            outcome.reason,
            outcome.error,
            delivery.deliveries,
            self.consumer,
        )

        def enqueue(pipe: Any) -> None:
            settings = self.settings
            queue_dead_letter(
                pipe, self.keys, letter, settings.dlq_maxlen, settings.idempotency_ttl_s
            )

        return enqueue

    def _ack_queuer(self, outcome: Acknowledge) -> Callable[[Any], None]:
        def enqueue(pipe: Any) -> None:
            pipe.xack(self.keys.stream, self.keys.group, outcome.delivery.id)
            pipe.delete(attempt_key(self.keys, outcome.delivery.id))

        return enqueue

    def _error_queuer(self, outcome: Failure) -> Callable[[Any], None]:
        def enqueue(pipe: Any) -> None:
            ttl = self.settings.idempotency_ttl_s
            queue_error(pipe, self.keys, outcome.delivery.id, outcome.error, ttl)

        return enqueue

    def _settled(self, outcome: Outcome, reply: Any) -> str:
        """Count and log an outcome other than an applied commit; its report field."""
        delivery = outcome.delivery
        log_fields = {**self.log_fields, "message_id": delivery.id}
        if isinstance(outcome, Failure):
            return "failed"
        if isinstance(outcome, Acknowledge) and outcome.why == "duplicate":
            self.metrics.inc("duplicate_acks")
            log.info("duplicate_ack", extra={**log_fields, "natural_key": outcome.natural_key})
            return "duplicates"
        if isinstance(outcome, Acknowledge) or reply == ALREADY_DEAD_LETTERED:
            log.info("already_dead_lettered", extra=log_fields)
            return "duplicates"
        if isinstance(outcome, Commit):
            if reply == "duplicate":
                self.metrics.inc("duplicate_acks")
                log.info("duplicate_ack", extra={**log_fields, "natural_key": outcome.natural_key})
                return "duplicates"
            log.warning("stale_commit", extra=log_fields)
            return "stale"
        if was_dead_lettered(reply):
            self.metrics.inc("dead_lettered")
            log.error(
                "dead_lettered",
                extra={
                    **log_fields,
                    "reason": outcome.reason,
                    "error": outcome.error,
                    "deliveries": delivery.deliveries,
                    "dlq": self.keys.dlq,
                },
            )
            return "dead_lettered"
        log.warning("stale_dead_letter", extra={**log_fields, "reason": outcome.reason})
        return "stale"

    def hand_back(self, rest: Sequence[Delivery]) -> None:
        """Make unprocessed messages claimable at once, with their delivery counts restored."""
        if not rest:
            return
        by_count: dict[int, list[Any]] = {}  # ids, typed as the client's stub wants
        for delivery in rest:
            by_count.setdefault(max(delivery.deliveries - 1, 0), []).append(delivery.id)
        pipe = self.client.pipeline(transaction=False)
        for count, ids in by_count.items():
            pipe.xclaim(
                self.keys.stream,
                self.keys.group,
                HANDBACK_CONSUMER,
                0,
                ids,
                idle=HANDBACK_IDLE_MS,
                retrycount=count,
                justid=True,
            )
        pipe.execute()
        log.info(
            "handed_back",
            extra={**self.log_fields, "messages": len(rest), "holder": HANDBACK_CONSUMER},
        )

    # --- lag, heartbeat, hang -----------------------------------------------------------------
    def write_lag(self) -> int:
        reading = measure_lag(self.client, self.keys)
        pipe = self.client.pipeline(transaction=False)  # the writes: one round trip
        queue_lag_key(pipe, self.keys, reading.lag, self.settings.lag_key_ttl_s)
        queue_record_lag(pipe, self.keys, reading.lag)  # the sensor reports peaks between ticks
        pipe.execute()
        self.metrics.set_gauge("lag", reading.lag)
        log.debug(
            "lag_written",
            extra={**self.log_fields, "lag": reading.lag, "backlog": reading.backlog},
        )
        return reading.lag

    def _maybe_write_lag(self) -> None:
        now = time.monotonic()
        if now >= self._next_lag_write:
            self._next_lag_write = now + LAG_WRITE_INTERVAL_S
            self._side_write_lag()

    def _side_write_lag(self) -> None:
        """:meth:`write_lag` as the side write it is: a refusal (a peaks key of the wrong
        type, a full server) is logged, never raised, so it holds nothing up. Redis
        unreachable or failing over is raised: the caller's outage handling applies."""
        try:
            self.write_lag()
        except redis.ResponseError as exc:
            if isinstance(exc, FAILOVER_ERRORS):
                raise
            self.heartbeat.failures.failed("lag", exc)
        else:
            self.heartbeat.failures.succeeded("lag")

    def _on_beat(self) -> None:
        """Before each lease refresh (heartbeat thread): the hang watchdog, nothing else.
        The lag write runs beside the refresh (``Heartbeat(side_writes=...)``)."""
        self.watchdog.check()

    def _give_up(self) -> None:
        self.heartbeat.stop()
        self.lease.release()

    def _lose_name(self) -> None:
        """Another process took our consumer name: stop (exit 2) rather than share it."""
        self._name_taken = True
        self.stop.set()

    # --- failures and shutdown --------------------------------------------------------------
    def _outage(self, exc: Exception) -> None:
        """Log and back off; buffered outcomes are kept and committed when Redis answers."""
        if isinstance(exc, (*TRANSIENT_ERRORS, *FAILOVER_ERRORS)):
            self.recovery.grace.outage()  # leases may expire meanwhile: see recovery_grace.py
        delay = self._backoff.next_delay()
        log.warning(
            "redis_error" if isinstance(exc, redis.ResponseError) else "redis_unavailable",
            extra={
                **self.log_fields,
                "error": str(exc),
                "retry_in_s": delay,
                "attempt": self._backoff.attempt,
                "uncommitted": len(self._outbox),
            },
        )
        self.stop.wait(delay)

    def _unexpected(self, exc: Exception) -> None:
        """An error no branch expects (a bug, here or in a plug-in): log it with its
        traceback and back off. The messages of the pass stay pending on us, so recovery
        retries them after ``SENTINEL_RETRY_BACKOFF_MS`` and the delivery limit ends a
        message that keeps failing. Buffered outcomes are dropped, not retried: one of
        them may be what fails, and their messages, still pending, are decided again
        (effects are idempotent)."""
        delay = self._backoff.next_delay()
        log.error(
            "iteration_failed",
            exc_info=exc,
            extra={
                **self.log_fields,
                "error": describe_error(exc),
                "retry_in_s": delay,
                "uncommitted": len(self._outbox),
            },
        )
        self._outbox.clear()
        self.stop.wait(delay)

    def _failover(self, exc: Exception) -> None:
        """A failover or resharding: drop kept connections (and the slot map), then back off.

        Buffered outcomes stay in the outbox and are committed once a primary answers.
        """
        self._reset_connections()
        self._outage(exc)

    def _reset_connections(self) -> None:
        self.reader.reset()  # it may be bound to a node that no longer serves the stream
        try:
            reset_connections(self.client)
        except (*TRANSIENT_ERRORS, *FAILOVER_ERRORS) as reset_exc:
            log.warning("reconnect_failed", extra={**self.log_fields, "error": str(reset_exc)})

    def _reached(self) -> None:
        """Redis answered a whole iteration: log the end of an outage once."""
        if self._backoff.attempt:
            log.info(
                "redis_reachable",
                extra={**self.log_fields, "after_attempts": self._backoff.attempt},
            )
        self._backoff.reset()

    def _heal(self, exc: redis.ResponseError) -> bool:
        """Recreate a group deleted under us (stream deleted, FLUSHALL); False if not that.

        Healing meets Redis as it is: a group it cannot recreate yet (a full server, Redis
        gone again) is waited out like any outage, and the next pass, meeting NOGROUP
        again, heals once more. It never raises a Redis error.
        """
        if "NOGROUP" not in str(exc):
            return False
        log.warning("group_missing", extra={**self.log_fields, "error": str(exc)})
        self._outbox.clear()  # their deliveries vanished with the group
        try:
            ensure_group(self.client, self.keys)
            self.lease.acquire()
        except FAILOVER_ERRORS as heal_exc:
            self._failover(heal_exc)
        except (*TRANSIENT_ERRORS, redis.ResponseError) as heal_exc:
            self._outage(heal_exc)
        except LeaseHeldError as held:  # our lease lapsed meanwhile and the name was taken
            log.error("lease_taken", extra={**self.log_fields, "error": str(held)})
            self._lose_name()
        else:
            self._tally["healed"] += 1
        return True

    def _retrying(self, action: Callable[[], None]) -> None:
        """``action()`` until it succeeds or we are asked to stop (the wait is cut short).

        Redis down, failing over or refusing for now (OOM, a key of the wrong type, a busy
        script) is waited out with backoff, logged as ``redis_unavailable`` or
        ``redis_error``. A refusal no wait can change raises :class:`RedisRefusedError`.
        """
        while not self.stop.is_set():
            try:
                action()
            except FAILOVER_ERRORS as exc:
                self._failover(exc)
            except TRANSIENT_ERRORS as exc:
                self._outage(exc)
            except redis.ResponseError as exc:
                if is_configuration_error(exc):
                    raise RedisRefusedError(
                        f"Redis refuses a command the worker needs: {exc} (see README 'Redis ACL')"
                    ) from None
                self._outage(exc)
            else:
                self._reached()
                return

    def _abandon_start(self) -> None:
        """Stopped before start-up finished: give back the lease if it was taken."""
        if self._lease_taken:
            self.heartbeat.stop()
            self._release_lease()
        log.info("stopped", extra={**self.log_fields, "started": False})

    def _release_lease(self) -> None:
        """Delete our lease if we can, so survivors recover our messages at once."""
        try:
            self.lease.release()
        except (redis.RedisError, *FAILOVER_ERRORS) as exc:
            log.warning("release_failed", extra={**self.log_fields, "error": str(exc)})

    def _finish_in_flight(self, deadline: float) -> None:
        """On stop, with a pool: calls not started and copies waiting on a call are handed
        back at once; calls in progress may finish until ``deadline`` (their outcomes are
        committed), the rest are handed back and their outcomes, if any, ignored."""
        if self.pool is None:
            return
        waiting = self.pool.take_back_queued()
        for prepared in waiting:
            self._in_flight.pop(prepared.delivery.id, None)
        waiting += [p for copies in self._followers.values() for p in copies]
        self._followers = {key: [] for key in self._followers}
        while self._in_flight and time.monotonic() < deadline:
            self._collect(min(FLUSH_INTERVAL_S, max(deadline - time.monotonic(), 0.001)))
        waiting += list(self._in_flight.values())
        self._in_flight.clear()
        self.pool.close()
        if not waiting:
            return
        try:
            self.hand_back([p.delivery for p in waiting])
            self._tally["handed_back"] += len(waiting)
        except (redis.RedisError, *FAILOVER_ERRORS) as exc:  # they stay pending on us
            log.warning("hand_back_failed", extra={**self.log_fields, "error": str(exc)})

    def shutdown(self) -> int:
        """Commit what is done, release the lease, leave the group if we hold nothing.

        Outcomes Redis will not take (down, failing over, full, a key of the wrong type)
        are retried with backoff until ``SENTINEL_SHUTDOWN_TIMEOUT_S`` has passed, then
        given up with one ``stopped_uncommitted`` line and :data:`EXIT_UNCOMMITTED`: their
        messages stay pending on this consumer, whose lease is gone, so the survivors
        recover them. Never raises a Redis error.
        """
        log.info(
            "stopping",
            extra={
                **self.log_fields,
                "uncommitted": len(self._outbox),
                "in_flight": len(self._in_flight),
            },
        )
        status = 0
        timeout_s = self.settings.shutdown_timeout_s
        deadline = time.monotonic() + timeout_s
        self._finish_in_flight(deadline)
        while self._outbox:
            try:
                self.flush()
            except (redis.RedisError, *FAILOVER_ERRORS) as exc:
                if isinstance(exc, redis.ResponseError) and "NOGROUP" in str(exc):
                    log.warning("group_missing", extra={**self.log_fields, "error": str(exc)})
                    self._outbox.clear()  # their deliveries vanished with the group
                    break
                if isinstance(exc, FAILOVER_ERRORS):
                    self._reset_connections()
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    log.error(
                        "stopped_uncommitted",
                        extra={
                            **self.log_fields,
                            "error": str(exc),
                            "left": len(self._outbox),
                            "timeout_s": timeout_s,
                        },
                    )
                    status = EXIT_UNCOMMITTED  # survivors recover them; commits are idempotent
                    break
                time.sleep(min(self._backoff.next_delay(), remaining))
        self.heartbeat.stop()
        try:
            left = self.lease.leave()  # atomic: never drops entries another process holds
            log.info(
                "left_group" if left == "left" else "kept_in_group",
                extra={**self.log_fields, "outcome": left},
            )
        except (redis.RedisError, *FAILOVER_ERRORS) as exc:
            log.warning("leave_failed", extra={**self.log_fields, "error": str(exc)})
            self._release_lease()  # at least the lease, if Redis takes that
        self.reader.reset()
        self._report()  # outcomes committed while stopping count in ``totals`` too
        log.info("stopped", extra={**self.log_fields, **self.metrics.snapshot()})
        return EXIT_NAME_IN_USE if self._name_taken else status


def _deliveries(reply: Any) -> list[Delivery]:
    """The new messages of an XREADGROUP reply (first deliveries)."""
    return [
        Delivery(message_id, fields or {}, 1)
        for _stream, entries in (reply or [])
        for message_id, fields in entries
    ]


def _marked(names: Sequence[str], markers: Sequence[Any]) -> set[str]:
    """The natural keys of ``names`` whose marker ``MGET`` found."""
    return {name for name, marker in zip(names, markers, strict=True) if marker is not None}


def _commit_item(commit: Commit) -> CommitItem:
    delivery = commit.delivery
    return CommitItem(
        delivery.id,
        commit.natural_key,
        {**commit.effect.result, "source_message_id": delivery.id},
        commit.effect.recent,
        clear_attempts=delivery.deliveries > 1,
    )


def _settled_replies(queued: Sequence[Outcome], replies: Sequence[Any]) -> list[Any]:
    """The reply of each outcome of one queued operation, read from that operation's replies.

    Commits: every script call of the operation returns a status per item, in order.
    A dead letter: its one script call. A failure's error record: nothing to read.
    """
    first = queued[0]
    if isinstance(first, Commit):
        return [status for reply in replies for status in commit_statuses(reply)]
    if isinstance(first, DeadLetterOp):
        [reply] = replies  # one atomic script call (dead_letter.py)
        return [reply]
    return [None]  # a failure's error record, an acknowledgement: nothing to read


__all__ = [
    "EXIT_UNCOMMITTED",
    "Consumer",
    "Delivery",
    "IterationReport",
    "RedisRefusedError",
    "pairs_to_dict",
]
