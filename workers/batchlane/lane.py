"""The batch lane of one stream in one worker: gather, record, submit, poll, commit.

One thread (:meth:`BatchLane.run`, started by :mod:`~workers.batchlane.runner`) runs it
while its worker holds the lane's lease (:class:`~workers.batchlane.lease.LaneLease`).
Each pass of :meth:`BatchLane.step`:

1. reads the lane's new entries (``XREADGROUP >``, blocking no longer than the next
   thing due, at most a second): an unreadable one is dead-lettered, a demo one decided
   by the rules at once, the rest gathered;
2. submits what is gathered when :func:`~workers.batchlane.pacing.submit_now` says so:
   each batch, cut to the provider's limits, is recorded in the ledger *before* the
   provider is asked (``record``), then ``submitted`` with the provider's id; a
   submission refused is ``refused`` and its messages go the way
   :mod:`~workers.batchlane.verdicts` says; one whose answer never came stays
   ``recorded`` and is resolved later (:meth:`BatchLane.resolve`: ``find`` it at the
   provider, submit it again only when nothing is found);
3. polls each outstanding batch when due (:func:`~workers.batchlane.pacing.next_poll_s`),
   keeping the provider's status text in the ledger at every poll; a batch that ended is
   ``ended``, its results committed one by one through the consumer's own commit
   (:class:`~workers.batchlane.settling.Settler`: result, idempotency marker, XACK),
   then ``settled``.

Whoever takes the lease resumes from the ledger (:meth:`BatchLane.resume`): refused
batches' messages are gathered again, unknown submissions resolved, submitted ones
polled, ended ones committed; then every other pending entry of the lane is taken over
and gathered. A commit is idempotent, so a batch committed twice (a holder that died
half-way) decides nothing twice; a batch is never submitted twice but for a provider
that keeps no label of it (Anthropic) whose creation went unanswered.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import redis

from sentinel_platform.logs import BoundLogger
from sentinel_platform.schemas import SchemaError, describe_error
from sentinel_platform.settings import Settings
from sentinel_platform.streams.consumer.group import ensure_group
from sentinel_platform.streams.consumer.outcomes import DeadLetterOp, Delivery
from sentinel_platform.streams.consumer.processor import Busy
from sentinel_platform.streams.consumer.settling.outbox import Outbox
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from workers.analyzer.answers.replies import AnalyzerDown, AnalyzerError
from workers.analyzer.batch.cutting import cut
from workers.analyzer.batch.ledger import BatchLedger, BatchRecord, new_local_id
from workers.analyzer.batch.openai_batch import ENQUEUED_LIMIT
from workers.analyzer.batch.protocol import BatchApi, BatchRequest
from workers.analyzer.prompts import Prompt
from workers.batchlane import stream_io
from workers.batchlane.lane_keys import batch_keys
from workers.batchlane.lease import LaneLease
from workers.batchlane.pacing import next_poll_s, submit_now
from workers.batchlane.requests import BodyOf
from workers.batchlane.settling import Settler
from workers.batchlane.verdicts import BatchVerdicts, Entry

log = logging.getLogger(__name__)

#: The longest one read of the lane blocks, so a stop and the lease are seen each second.
MAX_BLOCK_MS = 1000
#: Entries read at once.
READ_COUNT = 1000
#: A submission unanswered for this many call timeouts is unknown (resolved by a taker).
SUBMIT_DEADLINE_TIMEOUTS = 4


@dataclass
class Poll:
    """When an outstanding batch is polled next, and the wait that led there."""

    due: float
    wait_s: float | None = None


class BatchLane:
    """The batch lane of the stream ``keys`` names (see the module)."""

    def __init__(
        self,
        client: RedisClient,
        keys: StreamKeys,
        api: BatchApi,
        body_of: BodyOf,
        prompt: Prompt | None,
        verdicts: BatchVerdicts,
        settings: Settings,
        outbox: Outbox,
        consumer: str,
        stop: threading.Event,
    ) -> None:
        self.client, self.api, self.body_of, self.prompt = client, api, body_of, prompt
        self.keys = batch_keys(keys)
        self.ledger = BatchLedger(client, keys)
        self.verdicts, self.settings, self.outbox = verdicts, settings, outbox
        self.consumer, self.stop = consumer, stop
        self.lease = LaneLease(
            client, f"{self.keys.lease_prefix}lane", consumer, settings.lease_ttl_ms
        )
        self.log = BoundLogger(
            log, {"stream": self.keys.stream, "consumer": consumer, "api": api.kind}
        )
        self.settler = Settler(
            client, self.keys, self.ledger, api, prompt, verdicts, outbox, self.log
        )
        self.gathered: dict[str, Entry] = {}
        self.last_new = self.first_gathered = time.monotonic()
        self.polls: dict[str, Poll] = {}
        self.retry_unknown: dict[str, float] = {}
        #: submissions wait until this time (the provider's queue was full)
        self.held_until = 0.0
        self.submit_deadline_s = SUBMIT_DEADLINE_TIMEOUTS * settings.analyzer_call_timeout_s

    def run(self) -> None:
        """Hold the lease and run the lane until the stop; a lease lost is waited for again."""
        while self.lease.wait(self.stop):
            self.log.info("batch_lane_holding")
            with self.lease.kept(self.stop) as lost:
                resumed = False
                try:
                    while not self.stop.is_set() and not lost.is_set():
                        if resumed:
                            self.guarded(self.step)
                        else:
                            resumed = self.guarded(self.resume)
                finally:
                    self.forget()
        self.guarded(self.lease.release)

    def guarded(self, action: Callable[[], None]) -> bool:
        """Run ``action``; whether it ran through. A Redis or provider error is logged
        and the pass retried a moment later (what was done stays done: each step of a
        batch is recorded in the ledger before the next)."""
        try:
            action()
        except (redis.RedisError, AnalyzerError, Busy, OSError) as exc:
            self.log.warning("batch_lane_error", extra={"error": describe_error(exc)})
            self.stop.wait(min(1.0, self.settings.analyzer_batch_poll_s))
            return False
        return True

    def forget(self) -> None:
        """Drop what is held in memory (the lease is gone: the next holder takes it over)."""
        self.gathered.clear()
        self.polls.clear()
        self.outbox.clear()

    # --- resuming ------------------------------------------------------------------
    def resume(self) -> None:
        """Take over the ledger's batches and the lane's pending entries (see the module)."""
        ensure_group(self.client, self.keys)
        for record in self.ledger.batches():
            if record.state == "refused":  # its messages are gathered again below
                self.ledger.settled(record.local_id)
            elif record.state in ("submitted", "ended"):
                self.polls[record.local_id] = Poll(time.monotonic())
        known = {
            i for r in self.ledger.batches() for i in self.ledger.messages(r.local_id).values()
        }
        taken = stream_io.take_over(self.client, self.keys, self.consumer, known)
        self.take(taken)
        self.log.info(
            "batch_lane_resumed",
            extra={"outstanding": len(self.polls), "gathered": len(self.gathered)},
        )

    # --- one pass ------------------------------------------------------------------
    def step(self) -> None:
        room = max(0, min(READ_COUNT, self.api.limits.max_requests - len(self.gathered)))
        if room:
            read = stream_io.read_new(self.client, self.keys, self.consumer, room, self.block_ms())
            if read:
                self.last_new = time.monotonic()
            self.take(read)
        else:
            self.stop.wait(self.block_ms() / 1000)
        self.settler.flush()
        quiet = time.monotonic() - self.last_new
        held = time.monotonic() < self.held_until
        full = self.api.limits.max_requests
        window = self.settings.analyzer_batch_gather_s
        oldest = time.monotonic() - self.first_gathered
        if submit_now(len(self.gathered), full, quiet, oldest, window, held):
            self.submit(list(self.gathered.values()))
        for record in self.ledger.unknown(self.submit_deadline_s):
            if self.retry_unknown.get(record.local_id, 0.0) <= time.monotonic():
                self.resolve(record)
        for local_id, poll in list(self.polls.items()):
            if poll.due <= time.monotonic():
                self.poll(local_id, poll)

    def block_ms(self) -> int:
        """How long a read may wait: until the next poll or the gather window's end."""
        now = time.monotonic()
        due = [p.due for p in self.polls.values()]
        if self.gathered:
            due.append(self.last_new + self.settings.analyzer_batch_gather_s)
        wait_s = min(due, default=now + MAX_BLOCK_MS / 1000) - now
        return int(min(MAX_BLOCK_MS, max(1.0, wait_s * 1000)))

    def take(self, read: Sequence[tuple[str, dict[str, str]]]) -> None:
        """Gather ``read``'s entries: unreadable ones dead-lettered, those the processor
        decides without the model (a demo entry) decided at once."""
        for entry_id, fields in read:
            try:
                message = self.verdicts.live.parse(fields)
            except SchemaError as exc:
                delivery = Delivery(entry_id, fields, 1)
                self.outbox.add(DeadLetterOp(delivery, "invalid_message", str(exc)))
                continue
            entry = Entry(entry_id, fields, message)
            decided = self.verdicts.unasked(entry)
            if decided is None:
                if not self.gathered:
                    self.first_gathered = time.monotonic()
                self.gathered[entry_id] = entry
            else:
                self.outbox.add(decided)

    # --- submitting ----------------------------------------------------------------
    def submit(self, entries: Sequence[Entry]) -> None:
        """Cut ``entries`` into batches and submit each (see the module)."""
        requests: list[BatchRequest] = []
        by_id = {e.id: e for e in entries}
        for entry in entries:
            try:
                requests.append(BatchRequest(entry.id, self.body_of(entry.message)))
            except AnalyzerError as exc:  # the message does not fit the model
                self.settler.decide([self.verdicts.undecided(entry, "refused")])
                self.log.warning("batch_message_refused", extra={"error": describe_error(exc)})
        batches = cut(requests, self.api.size, self.api.limits)
        self.settler.decide(
            [self.verdicts.undecided(by_id[r.custom_id], "refused") for r in batches.too_large]
        )
        for batch in batches.batches:
            local_id = new_local_id()
            self.ledger.record(local_id, self.api.kind, {r.custom_id: r.custom_id for r in batch})
            for request in batch:  # recorded: the ledger answers for them from now on
                self.gathered.pop(request.custom_id, None)
            self.send(local_id, batch, [by_id[r.custom_id] for r in batch])
        for request in batches.too_large:
            self.gathered.pop(request.custom_id, None)
        self.settler.flush()

    def send(self, local_id: str, batch: Sequence[BatchRequest], entries: Sequence[Entry]) -> None:
        """Submit one recorded batch; what its answer (or none) comes to."""
        try:
            ref = self.api.submit(batch, local_id)
        except AnalyzerDown as exc:  # the provider may or may not have it: resolved later
            self.log.warning(
                "batch_submit_unanswered",
                extra={"local_id": local_id, "error": describe_error(exc)},
            )
            self.retry_unknown[local_id] = time.monotonic() + self.submit_deadline_s
            return
        except Busy as exc:  # nothing created: gathered again once the wait is over
            self.ledger.refused(local_id, describe_error(exc))
            self.ledger.settled(local_id)
            self.held_until = time.monotonic() + (
                exc.retry_after_s or self.settings.analyzer_batch_poll_s
            )
            self.gathered.update({e.id: e for e in entries})
            return
        except AnalyzerError as exc:  # refused: no batch exists there
            self.ledger.refused(local_id, describe_error(exc))
            self.log.warning(
                "batch_refused", extra={"local_id": local_id, "error": describe_error(exc)}
            )
            self.settler.decide([self.verdicts.undecided(e, "refused") for e in entries])
            self.settler.flush()
            self.ledger.settled(local_id)
            return
        self.ledger.submitted(local_id, ref.batch_id)
        self.polls[local_id] = Poll(time.monotonic() + self.first_poll_s())
        self.log.info(
            "batch_submitted",
            extra={"local_id": local_id, "batch_id": ref.batch_id, "messages": len(batch)},
        )

    def resolve(self, record: BatchRecord) -> None:
        """A submission whose answer never came: found at the provider by its label, or
        submitted again (only when the provider has none of that label)."""
        self.retry_unknown[record.local_id] = time.monotonic() + self.submit_deadline_s
        since_s = record.created_ms / 1000 - self.submit_deadline_s
        ref = self.api.find(record.local_id, since_s)
        if ref is not None:
            self.ledger.submitted(record.local_id, ref.batch_id)
            self.polls[record.local_id] = Poll(time.monotonic())
            self.log.info(
                "batch_found", extra={"local_id": record.local_id, "batch_id": ref.batch_id}
            )
            return
        entries = self.settler.entries_of(record.local_id)
        requests = [BatchRequest(e.id, self.body_of(e.message)) for e in entries.values()]
        self.log.info("batch_resubmitted", extra={"local_id": record.local_id})
        self.send(record.local_id, requests, list(entries.values()))

    # --- polling and committing ----------------------------------------------------
    def first_poll_s(self) -> float:
        return next_poll_s(
            None, self.settings.analyzer_batch_poll_s, self.settings.analyzer_batch_poll_max_s
        )

    def poll(self, local_id: str, poll: Poll) -> None:
        """Poll one batch; commit it once it ended."""
        record = self.ledger.get(local_id)
        if record is None or record.ref is None:  # settled meanwhile
            self.polls.pop(local_id, None)
            return
        wait_s = next_poll_s(
            poll.wait_s,
            self.settings.analyzer_batch_poll_s,
            self.settings.analyzer_batch_poll_max_s,
        )
        # the next look is due after the wait, whatever this one comes to (a provider
        # down while it polls or reads results is asked again no sooner)
        self.polls[local_id] = Poll(time.monotonic() + wait_s, wait_s)
        held = record.reason.startswith(ENQUEUED_LIMIT)  # ended so before a take-over
        if record.state == "submitted":
            state = self.api.poll(record.ref)
            self.ledger.polled(local_id, state.provider_status)
            if not state.done:
                return
            self.ledger.ended(local_id, state.reason)
            held = state.held
            if held:
                self.held_until = time.monotonic() + self.settings.analyzer_batch_poll_max_s
            else:
                self.held_until = 0.0  # a batch ended: the provider's queue has room
            self.log.info(
                "batch_ended",
                extra={
                    "local_id": local_id,
                    "provider_status": state.provider_status,
                    "reason": state.reason,
                },
            )
        self.settler.commit(record, held)
        self.polls.pop(local_id, None)
