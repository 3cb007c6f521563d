"""The consumer loop: recover, read, process, commit in batches, publish lag.

One pass, :meth:`Consumer.iteration`, returns an :class:`IterationReport`::

    flush anything not yet committed (after a Redis outage)
    recovery.step()                 # claims due messages: dead workers', our own failures
    XREADGROUP > COUNT n BLOCK b    # b <= 1 s, so recovery runs at least once a second
    process each message            # parse -> (DLQ | process -> effect | failure)
    commit the batch in pipelines   # one EVALSHA per batch, one round trip per flush
    write the lag key (rate-limited; the heartbeat writes it too)

:meth:`Consumer.run` repeats it: as a service (``burst=False``, the worker process) until
asked to stop, or in burst mode (``burst=True``) until a pass finds nothing to do, nothing
is left uncommitted and we hold no pending message, so the loop can be driven in-process
and return on its own. Both share the start-up, the error handling and the shutdown.

Outcomes of a message, decided by :meth:`Consumer._decide`:

* ``SchemaError`` (from ``parse``, or ``process`` rejecting the content) -> dead letter
  ``invalid_message`` at once, no retries;
* a redelivery whose recorded processor calls reach the delivery limit -> dead letter
  ``max_deliveries_exceeded`` *unprocessed*, with the last error (see ``attempts.py``);
* any other exception (processor or parser bug) -> stays pending on us, its error
  recorded; recovery hands it back after ``SENTINEL_RETRY_BACKOFF_MS`` (XCLAIM to
  ourselves bumps the delivery count);
* otherwise the effect is committed atomically with its marker and XACK
  (``idempotency.py``).

Commits are buffered and flushed when the batch ends or every ``FLUSH_INTERVAL_S``,
so fast processors pay one round trip per batch and slow ones still acknowledge each
message promptly. Each outcome's replies come back to it by structure
(``tagged_pipeline.py``), never by counting the commands a helper queues. A failed flush
(connection loss) keeps the outcomes in memory and retries them with backoff; since every
commit is idempotent, nothing is lost or doubled. Other Redis errors (OOM, a key of the
wrong type) are logged and retried the same way: a worker never crash-loops. A group
deleted under the worker (NOGROUP) is recreated at id 0 (:meth:`Consumer._heal`).

On stop (SIGTERM/SIGINT) the message in hand is finished, the outcomes are committed,
and the unprocessed rest of the batch is handed back: moved to the lease-less consumer
:data:`HANDBACK_CONSUMER` with an idle time far past every threshold and its delivery
count restored, so any live worker (or the next one to start) claims it on its next
recovery step. Stopping therefore takes block time + one message, not a whole batch,
and leaves nothing pending on the stopped consumer, which then leaves the group.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from typing import Any, TypeVar

import redis

from sentinel_platform.schemas import DeadLetterReason, SchemaError, describe_error
from sentinel_platform.settings import Settings
from sentinel_platform.streams.attempts import (
    RECORD_CALL,
    AttemptRecord,
    queue_error,
    read_attempts,
    record_call,
)
from sentinel_platform.streams.backoff import Backoff
from sentinel_platform.streams.connection import (
    FAILOVER_ERRORS,
    TRANSIENT_ERRORS,
    RedisClient,
    reset_connections,
)
from sentinel_platform.streams.dead_letter import (
    DEAD_LETTER,
    NO_ERROR_RECORDED,
    build_dead_letter,
    queue_dead_letter,
    was_dead_lettered,
)
from sentinel_platform.streams.group import ensure_group
from sentinel_platform.streams.idempotency import (
    COMMIT_EFFECTS,
    CommitItem,
    CommitLimits,
    check_effect,
    commit_statuses,
    queue_commits,
)
from sentinel_platform.streams.keys import StreamKeys
from sentinel_platform.streams.lag import measure_lag, queue_lag_key
from sentinel_platform.streams.lease import (
    EXIT_NAME_IN_USE,
    Heartbeat,
    Lease,
    heartbeat_interval_s,
)
from sentinel_platform.streams.metrics import Metrics
from sentinel_platform.streams.peaks import queue_record_lag
from sentinel_platform.streams.processor import Effect, Processor
from sentinel_platform.streams.recovery import CLAIM, PRUNE, Delivery, Recovery, pairs_to_dict
from sentinel_platform.streams.retention import Retention
from sentinel_platform.streams.scripts import with_scripts
from sentinel_platform.streams.tagged_pipeline import TaggedPipeline
from sentinel_platform.streams.watchdog import HangWatchdog, InHand

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
#: In burst mode, how long an idle pass waits while our own failures await their retry.
BURST_POLL_S = 0.02
BACKOFF_START_S = 0.1
BACKOFF_CAP_S = 5.0
ALL_SCRIPTS = (COMMIT_EFFECTS, DEAD_LETTER, CLAIM, PRUNE, RECORD_CALL)


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


Outcome = Commit | DeadLetterOp | Failure


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
        self._name_taken = False
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
        )
        self._outbox: list[Outcome] = []
        self._last_flush = time.monotonic()
        self._next_lag_write = 0.0
        self._backoff = Backoff(BACKOFF_START_S, BACKOFF_CAP_S)
        self._burst = False
        self._started = False
        self._tally: Counter[str] = Counter()
        #: everything handled since this consumer was made (the sum of every pass)
        self.totals = IterationReport()

    # --- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        """Join the group: scripts loaded, group ensured, lease taken, heartbeat running."""
        for script in ALL_SCRIPTS:
            script.load(self.client)
        ensure_group(self.client, self.keys)
        self.lease.acquire()
        self.write_lag()  # a worker that is up says so at once, even before its first read
        self.heartbeat.start()
        self._started = True
        log.info(
            "started",
            extra={**self.log_fields, "count": self.count, "block_ms": self.block_ms},
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
        if self.stop.is_set():
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
        else:
            self._reached()
            return result
        return None

    def iteration(self) -> IterationReport:
        """One pass: flush leftovers, recover, read a batch, process and commit it."""
        if self._outbox:
            self.flush()
        recovered = self.recovery.step(self.count)
        self._tally["recovered"] += len(recovered)
        if recovered:
            self.handle(recovered)
        if self.stop.is_set():
            return self._report()
        block = self._block(bool(recovered))
        reply = self.client.xreadgroup(
            self.keys.group, self.consumer, {self.keys.stream: ">"}, count=self.count, block=block
        )
        batch = _deliveries(reply)
        self._tally["read"] += len(batch)
        if batch:
            self.handle(batch)
        elif block is None and not recovered and not self._burst:
            self.stop.wait(0.05)  # --block-ms 0: poll, but do not spin
        self._maybe_write_lag()
        self.retention.maybe_trim()  # at most once per SENTINEL_STREAM_RETENTION_INTERVAL_S
        return self._report()

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
        if self._outbox:
            return False
        mine = self.client.xpending_range(
            self.keys.stream, self.keys.group, "-", "+", 1, consumername=self.consumer
        )
        return not mine

    # --- processing ------------------------------------------------------------------------
    def handle(self, batch: Sequence[Delivery]) -> None:
        """Decide every message of the batch and commit the outcomes in pipelines."""
        redelivered = [d.id for d in batch if d.deliveries > 1]
        records = read_attempts(self.client, self.keys, redelivered)
        for index, delivery in enumerate(batch):
            if self.stop.is_set():
                self.flush()
                self.hand_back(batch[index:])
                self._tally["handed_back"] += len(batch) - index
                return
            self._outbox.append(self._decide(delivery, records.get(delivery.id)))
            if time.monotonic() - self._last_flush >= FLUSH_INTERVAL_S:
                self.flush()
        self.flush()

    def _decide(self, delivery: Delivery, record: AttemptRecord | None) -> Outcome:
        if delivery.deliveries > 1:
            record = record or AttemptRecord()
            # The first delivery counts as one call: it is never recorded (hot path).
            if record.calls + 1 >= self.settings.reclaim_delivery_limit:
                error = record.last_error or NO_ERROR_RECORDED
                return DeadLetterOp(delivery, "max_deliveries_exceeded", error)
            # Recorded before the call, so a call that kills the worker still counts.
            record_call(
                self.client,
                self.keys,
                delivery.id,
                delivery.deliveries,
                self.settings.idempotency_ttl_s,
            )
            if delivery.claimed_from == self.consumer:
                log.info(
                    "retrying",
                    extra={
                        **self.log_fields,
                        "message_id": delivery.id,
                        "deliveries": delivery.deliveries,
                        "call": record.calls + 2,
                    },
                )
        self.in_hand.take(delivery.id)
        started = time.perf_counter()
        try:
            message = self.processor.parse(delivery.fields)
            natural_key = self.processor.natural_key(message)
            if self.settings.simulate_latency_ms:
                time.sleep(self.settings.simulate_latency_ms / 1000)
            effect = self.processor.process(message)
            check_effect(effect.result, effect.recent)  # unsendable: a processor failure
        except SchemaError as exc:
            return DeadLetterOp(delivery, "invalid_message", describe_error(exc))
        except Exception as exc:  # a processor (or parser) error never kills the worker
            return self._failed(delivery, exc)
        finally:
            self.in_hand.drop()
            self._observe_processing(time.perf_counter() - started)
        return Commit(delivery, natural_key, effect)

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
            queue_dead_letter(pipe, self.keys, letter, self.settings.dlq_maxlen)

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
            self.write_lag()

    def _on_beat(self) -> None:
        self.watchdog.check()
        try:
            self.write_lag()
        except (*TRANSIENT_ERRORS, *FAILOVER_ERRORS):
            self.recovery.grace.outage()  # leases may expire meanwhile: see recovery_grace.py
            raise

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

    def _failover(self, exc: Exception) -> None:
        """A failover or resharding: drop kept connections (and the slot map), then back off.

        Buffered outcomes stay in the outbox and are committed once a primary answers.
        """
        try:
            reset_connections(self.client)
        except (*TRANSIENT_ERRORS, *FAILOVER_ERRORS) as reset_exc:
            log.warning("reconnect_failed", extra={**self.log_fields, "error": str(reset_exc)})
        self._outage(exc)

    def _reached(self) -> None:
        """Redis answered a whole iteration: log the end of an outage once."""
        if self._backoff.attempt:
            log.info(
                "redis_reachable",
                extra={**self.log_fields, "after_attempts": self._backoff.attempt},
            )
        self._backoff.reset()

    def _heal(self, exc: redis.ResponseError) -> bool:
        """Recreate a group deleted under us (stream deleted, FLUSHALL); False if not that."""
        if "NOGROUP" not in str(exc):
            return False
        log.warning("group_missing", extra={**self.log_fields, "error": str(exc)})
        self._outbox.clear()  # their deliveries vanished with the group
        ensure_group(self.client, self.keys)
        self.lease.acquire()
        self._tally["healed"] += 1
        return True

    def _retrying(self, action: Callable[[], None]) -> None:
        while not self.stop.is_set():
            try:
                action()
                self._backoff.reset()
                return
            except FAILOVER_ERRORS as exc:
                self._failover(exc)
            except TRANSIENT_ERRORS as exc:
                self._outage(exc)

    def shutdown(self) -> int:
        """Commit what is done, release the lease, leave the group if we hold nothing."""
        log.info("stopping", extra={**self.log_fields, "uncommitted": len(self._outbox)})
        status = 0
        deadline = time.monotonic() + 10
        while self._outbox:
            try:
                self.flush()
            except TRANSIENT_ERRORS as exc:
                if time.monotonic() > deadline:
                    log.error(
                        "stopped_uncommitted",
                        extra={**self.log_fields, "error": str(exc), "left": len(self._outbox)},
                    )
                    status = 1  # still pending: survivors recover them; effects are idempotent
                    break
                time.sleep(self._backoff.next_delay())
        self.heartbeat.stop()
        try:
            left = self.lease.leave()  # atomic: never drops entries another process holds
            log.info(
                "left_group" if left == "left" else "kept_in_group",
                extra={**self.log_fields, "outcome": left},
            )
        except TRANSIENT_ERRORS as exc:
            log.warning("release_failed", extra={**self.log_fields, "error": str(exc)})
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
    return [None]


__all__ = ["Consumer", "Delivery", "IterationReport", "pairs_to_dict"]
