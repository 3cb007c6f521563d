"""The consumer loop: recover, read, process, commit in batches, publish lag.

One iteration::

    flush anything not yet committed (after a Redis outage)
    recovery.step()                 # claims due messages: dead workers', our own failures
    XREADGROUP > COUNT n BLOCK b    # b <= 1 s, so recovery runs at least once a second
    process each message            # parse -> (DLQ | process -> effect | failure)
    commit the batch in pipelines   # one EVALSHA per batch, one round trip per flush
    write the lag key (rate-limited; the heartbeat writes it too)

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
message promptly. A failed flush (connection loss) keeps the outcomes in memory and
retries them with backoff; since every commit is idempotent, nothing is lost or doubled.
Other Redis errors (OOM, a key of the wrong type) are logged and retried the same way:
a worker never crash-loops.

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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from sentinel_platform.schemas import SchemaError, describe_error
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
from sentinel_platform.streams.lag import measure_lag, write_lag_key
from sentinel_platform.streams.lease import (
    EXIT_NAME_IN_USE,
    Heartbeat,
    Lease,
    heartbeat_interval_s,
)
from sentinel_platform.streams.metrics import Metrics
from sentinel_platform.streams.peaks import record_lag
from sentinel_platform.streams.processor import Effect, Processor
from sentinel_platform.streams.recovery import CLAIM, PRUNE, Delivery, Recovery, pairs_to_dict
from sentinel_platform.streams.retention import Retention
from sentinel_platform.streams.scripts import with_scripts
from sentinel_platform.streams.watchdog import HangWatchdog, InHand

log = logging.getLogger(__name__)

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
    reason: str
    error: str


@dataclass(slots=True)
class Failure:
    delivery: Delivery
    error: str


Outcome = Commit | DeadLetterOp | Failure


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
        self.lease = Lease(client, keys, consumer, settings.lease_ttl_ms)
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

    # --- lifecycle ---------------------------------------------------------------------------
    def start(self) -> None:
        """Join the group: scripts loaded, group ensured, lease taken, heartbeat running."""
        for script in ALL_SCRIPTS:
            script.load(self.client)
        ensure_group(self.client, self.keys)
        self.lease.acquire()
        self.write_lag()  # a worker that is up says so at once, even before its first read
        self.heartbeat.start()
        log.info(
            "started",
            extra={**self.log_fields, "count": self.count, "block_ms": self.block_ms},
        )

    def run(self) -> int:
        """Consume until asked to stop; the exit status of the worker process."""
        self._retrying(self.start)
        if self.stop.is_set():
            return 0
        while not self.stop.is_set():
            try:
                self.iteration()
                self._reached()
            except FAILOVER_ERRORS as exc:
                self._failover(exc)
            except TRANSIENT_ERRORS as exc:
                self._outage(exc)
            except redis.ResponseError as exc:
                if not self._heal(exc):
                    self._outage(exc)  # e.g. OOM or a wrong key type: wait, never crash-loop
        return self.shutdown()

    def iteration(self) -> None:
        if self._outbox:
            self.flush()
        recovered = self.recovery.step(self.count)
        if recovered:
            self.handle(recovered)
        if self.stop.is_set():
            return
        block = self._block(bool(recovered))
        reply = self.client.xreadgroup(
            self.keys.group, self.consumer, {self.keys.stream: ">"}, count=self.count, block=block
        )
        batch = [
            Delivery(message_id, fields or {}, 1)
            for _stream, entries in (reply or [])
            for message_id, fields in entries
        ]
        if batch:
            self.handle(batch)
        elif block is None and not recovered:
            self.stop.wait(0.05)  # --block-ms 0: poll, but do not spin
        self._maybe_write_lag()
        self.retention.maybe_trim()  # at most once per SENTINEL_STREAM_RETENTION_INTERVAL_S

    def _block(self, busy: bool) -> int | None:
        if busy or self.block_ms == 0:
            return None
        return min(self.block_ms, MAX_BLOCK_MS)

    # --- processing ------------------------------------------------------------------------
    def handle(self, batch: Sequence[Delivery]) -> None:
        """Decide every message of the batch and commit the outcomes in pipelines."""
        redelivered = [d.id for d in batch if d.deliveries > 1]
        records = read_attempts(self.client, self.keys, redelivered)
        for index, delivery in enumerate(batch):
            if self.stop.is_set():
                self.flush()
                self.hand_back(batch[index:])
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
            self.metrics.observe_processing(time.perf_counter() - started)
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
                self._settled(outcome, reply)
        if applied:
            self.metrics.inc("processed", applied)

    def _send(self, outbox: Sequence[Outcome]) -> list[tuple[Outcome, Any]]:
        """One pipeline: the batch's commits in few script calls, dead letters, errors."""
        commits = [o for o in outbox if isinstance(o, Commit)]
        others = [o for o in outbox if not isinstance(o, Commit)]
        pipe = self.client.pipeline(transaction=False)
        items = [
            CommitItem(
                o.delivery.id,
                o.natural_key,
                {**o.effect.result, "source_message_id": o.delivery.id},
                o.effect.recent,
                clear_attempts=o.delivery.deliveries > 1,
            )
            for o in commits
        ]
        calls = queue_commits(pipe, self.keys, items, self.limits) if items else 0
        for outcome in others:
            if isinstance(outcome, DeadLetterOp):
                delivery = outcome.delivery
                letter = build_dead_letter(
                    self.keys,
                    delivery.id,
                    delivery.fields,
                    outcome.reason,  # type: ignore[arg-type]
                    outcome.error,
                    delivery.deliveries,
                    self.consumer,
                )
                queue_dead_letter(pipe, self.keys, letter, self.settings.dlq_maxlen)
            else:
                queue_error(
                    pipe,
                    self.keys,
                    outcome.delivery.id,
                    outcome.error,
                    self.settings.idempotency_ttl_s,
                )
        replies = pipe.execute()
        statuses = [status for reply in replies[:calls] for status in commit_statuses(reply)]
        settled: list[tuple[Outcome, Any]] = list(zip(commits, statuses, strict=True))
        index = calls
        for outcome in others:
            settled.append((outcome, replies[index]))
            index += 2 if isinstance(outcome, Failure) else 1  # HSET + EXPIRE
        return settled

    def _settled(self, outcome: Outcome, reply: Any) -> None:
        delivery = outcome.delivery
        fields = {**self.log_fields, "message_id": delivery.id}
        if isinstance(outcome, Commit):
            if reply == "duplicate":
                self.metrics.inc("duplicate_acks")
                log.info("duplicate_ack", extra={**fields, "natural_key": outcome.natural_key})
            else:
                log.warning("stale_commit", extra=fields)
        elif isinstance(outcome, DeadLetterOp):
            if was_dead_lettered(reply):
                self.metrics.inc("dead_lettered")
                log.error(
                    "dead_lettered",
                    extra={
                        **fields,
                        "reason": outcome.reason,
                        "error": outcome.error,
                        "deliveries": delivery.deliveries,
                        "dlq": self.keys.dlq,
                    },
                )
            else:
                log.warning("stale_dead_letter", extra={**fields, "reason": outcome.reason})

    def hand_back(self, rest: Sequence[Delivery]) -> None:
        """Make unprocessed messages claimable at once, with their delivery counts restored."""
        if not rest:
            return
        by_count: dict[int, list[str]] = {}
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
        write_lag_key(self.client, self.keys, reading.lag, self.settings.lag_key_ttl_s)
        record_lag(self.client, self.keys, reading.lag)  # the sensor reports peaks between ticks
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
        log.info("stopped", extra={**self.log_fields, **self.metrics.snapshot()})
        return EXIT_NAME_IN_USE if self._name_taken else status


__all__ = ["Consumer", "Delivery", "pairs_to_dict"]
