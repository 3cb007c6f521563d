"""Settling the batch lane's messages: an ended batch's results committed one by one,
the messages without a verdict sent their way, and the batch then left the ledger.

Every message is committed through the consumer's own commit
(:class:`~sentinel_platform.streams.consumer.settling.outbox.Outbox`: the result, the
idempotency marker and the XACK in one script), dead letters through its dead-letter
script, and a message sent back to the lane is put back atomically
(:class:`~workers.batchlane.stream_io.Requeuer`). Results are read as they stream in and
committed every :data:`COMMIT_EVERY` messages, so a results file of any size is never
held whole; a settler that dies half-way leaves the batch ``ended``, and whoever commits
it again decides nothing twice (the markers answer for what was committed).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from sentinel_platform.logs import BoundLogger
from sentinel_platform.schemas import SchemaError
from sentinel_platform.streams.consumer.outcomes import DeadLetterOp, Delivery
from sentinel_platform.streams.consumer.settling.outbox import Outbox
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from workers.analyzer.answers.replies import Assessment
from workers.analyzer.batch.ledger import BatchLedger, BatchRecord
from workers.analyzer.batch.protocol import BatchApi, BatchFailed, unanswered
from workers.analyzer.prompts import Prompt
from workers.batchlane import stream_io
from workers.batchlane.verdicts import BatchVerdicts, Decision, Entry, Requeue, Undecided

log = logging.getLogger(__name__)

#: Decisions buffered before they are committed.
COMMIT_EVERY = 500


class Settler:
    """Settles the batches of the lane ``keys`` names (see the module)."""

    def __init__(
        self,
        client: RedisClient,
        keys: StreamKeys,
        ledger: BatchLedger,
        api: BatchApi,
        prompt: Prompt | None,
        verdicts: BatchVerdicts,
        outbox: Outbox,
        log_to: BoundLogger,
    ) -> None:
        self.client, self.keys, self.ledger, self.api = client, keys, ledger, api
        self.prompt, self.verdicts, self.outbox, self.log = prompt, verdicts, outbox, log_to
        self.requeuer = stream_io.Requeuer(client, keys)

    def entries_of(self, local_id: str) -> dict[str, Entry]:
        """The batch's messages still in the lane, by ``custom_id`` (their entry ids)."""
        found = stream_io.fetch(self.client, self.keys, self.ledger.messages(local_id).values())
        entries: dict[str, Entry] = {}
        for entry_id, fields in found.items():
            try:
                entries[entry_id] = Entry(entry_id, fields, self.verdicts.live.parse(fields))
            except SchemaError:  # recorded once it parsed: the stream's entry changed
                self.outbox.add(
                    DeadLetterOp(Delivery(entry_id, fields, 1), "invalid_message", "unreadable")
                )
        return entries

    def commit(self, record: BatchRecord, held: bool) -> None:
        """Commit every message of an ended batch, then settle it."""
        assert record.ref is not None
        entries = self.entries_of(record.local_id)
        decisions: list[Decision] = []
        answered: set[str] = set()
        try:
            for custom_id, outcome in self.api.results(record.ref, self.prompt):
                entry = entries.get(custom_id)
                if entry is None or custom_id in answered:
                    continue
                answered.add(custom_id)
                if isinstance(outcome, Assessment):
                    decisions.append(self.verdicts.verdict(entry, outcome))
                else:
                    decisions.append(self.verdicts.undecided(entry, outcome.kind, outcome.usage))
                if len(decisions) >= COMMIT_EVERY:
                    self.decide(decisions)
                    decisions = []
            why: Undecided = "unanswered"
            rest = unanswered(entries, answered)
        except BatchFailed:
            why, rest = ("held" if held else "failed"), [i for i in entries if i not in answered]
        decisions.extend(self.verdicts.undecided(entries[i], why) for i in rest)
        self.decide(decisions)
        self.flush()
        self.ledger.settled(record.local_id)
        self.log.info(
            "batch_settled",
            extra={
                "local_id": record.local_id,
                "answered": len(answered),
                "undecided": len(rest),
                "why": why if rest else "",
            },
        )

    def decide(self, decisions: Sequence[Decision]) -> None:
        """Buffer commits and dead letters; put requeued entries back at once."""
        for decision in decisions:
            if isinstance(decision, Requeue):
                self.flush()
                self.requeuer.requeue(decision.entry.id, decision.entry.fields)
            else:
                self.outbox.add(decision)
        if len(self.outbox) >= COMMIT_EVERY:
            self.flush()

    def flush(self) -> None:
        """Commit what is buffered."""
        if len(self.outbox):
            self.outbox.flush()
