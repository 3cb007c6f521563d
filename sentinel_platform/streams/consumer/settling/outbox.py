"""Settling outcomes in Redis: every decided outcome of a worker, in one round trip.

:class:`Outbox` buffers outcomes and :meth:`Outbox.flush` sends them in one pipeline: the
commits in few script calls (effect, marker and XACK atomically, ``idempotency.py``),
each dead letter in its script call (``dead_letter.py``), each failure's error record,
each acknowledgement. Each outcome gets the replies of its own commands back by
structure (``TaggedPipeline``), never by counting what a helper queues. A flush that
fails keeps every outcome buffered, to be sent again: every command is idempotent, so
nothing is lost or doubled. :meth:`Outbox.hand_back` makes unprocessed messages
claimable at once by any worker, for a stop.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any

from sentinel_platform.logs import BoundLogger
from sentinel_platform.settings import Settings
from sentinel_platform.streams.consumer.calling.claims import CLAIM as CLAIM_KEYS
from sentinel_platform.streams.consumer.calling.claims import REFRESH as REFRESH_CLAIMS
from sentinel_platform.streams.consumer.calling.claims import claim_key
from sentinel_platform.streams.consumer.healing.recovery import CLAIM, PRUNE
from sentinel_platform.streams.consumer.metrics import VERDICT_DRIVERS, Metrics
from sentinel_platform.streams.consumer.outcomes import (
    Acknowledge,
    Commit,
    DeadLetterOp,
    Delivery,
    Failure,
    Outcome,
)
from sentinel_platform.streams.consumer.processor import Effect
from sentinel_platform.streams.consumer.settling.attempts import RECORD_CALL, queue_error
from sentinel_platform.streams.consumer.settling.dead_letter import (
    ALREADY_DEAD_LETTERED,
    DEAD_LETTER,
    build_dead_letter,
    queue_dead_letter,
    was_dead_lettered,
)
from sentinel_platform.streams.consumer.settling.idempotency import (
    COMMIT_EFFECTS,
    CommitItem,
    CommitLimits,
    commit_statuses,
    queue_commits,
)
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import HANDBACK_CONSUMER, StreamKeys, attempt_key
from sentinel_platform.streams.plumbing.scripts import with_scripts
from sentinel_platform.streams.plumbing.tagged_pipeline import TaggedPipeline

log = logging.getLogger(__name__)

#: Every script the worker runs, loaded at start and again after a server lost them.
ALL_SCRIPTS = (COMMIT_EFFECTS, DEAD_LETTER, CLAIM, PRUNE, RECORD_CALL, CLAIM_KEYS, REFRESH_CLAIMS)
#: Idle time given to handed-back messages: past every claim threshold.
HANDBACK_IDLE_MS = 10**10


class Outbox:
    """The outcomes a worker decided and has not yet settled in Redis."""

    def __init__(
        self,
        client: RedisClient,
        keys: StreamKeys,
        settings: Settings,
        consumer: str,
        metrics: Metrics,
        log_fields: dict[str, str],
        releases_claims: bool = False,
    ) -> None:
        self.client = client
        #: commits delete their keys' in-flight claims (a processor with paid calls)
        self.releases_claims = releases_claims
        self.keys = keys
        self.settings = settings
        self.consumer = consumer
        self.metrics = metrics
        self.log = BoundLogger(log, log_fields)
        self.limits = CommitLimits(
            settings.results_maxlen, settings.idempotency_ttl_s, settings.recent_transactions_size
        )
        self.outcomes: list[Outcome] = []
        self.last_flush = time.monotonic()

    def __len__(self) -> int:
        return len(self.outcomes)

    def add(self, outcome: Outcome) -> None:
        self.outcomes.append(outcome)

    def extend(self, outcomes: Sequence[Outcome]) -> None:
        self.outcomes.extend(outcomes)

    def ids(self) -> set[str]:
        return {outcome.delivery.id for outcome in self.outcomes}

    def effects(self) -> dict[str, Effect]:
        """The effects decided and not yet committed, by natural key: a copy of one of
        these keys shares the effect rather than making a call of its own."""
        return {o.natural_key: o.effect for o in self.outcomes if isinstance(o, Commit)}

    def clear(self) -> None:
        """Forget what is buffered (their deliveries vanished, or are decided again)."""
        self.outcomes.clear()

    def flush(self, client: RedisClient | None = None) -> Counter[str]:
        """Settle the buffered outcomes in one pipeline; what they came to, by report
        field. On failure they stay buffered and the error is raised. ``client``: the
        stop path's bounded client (``deadline.py``); by default the worker's own."""
        self.last_flush = time.monotonic()
        tally: Counter[str] = Counter()
        if not self.outcomes:
            return tally
        outbox = list(self.outcomes)
        started = time.perf_counter()
        via = client or self.client
        settled = with_scripts(via, ALL_SCRIPTS, lambda: self._send(outbox, via))
        self.metrics.observe_commit(time.perf_counter() - started)
        del self.outcomes[: len(outbox)]
        applied: list[Commit] = []
        for outcome, reply in settled:
            if reply == "applied" and isinstance(outcome, Commit):  # the hot path
                applied.append(outcome)
            else:
                tally[self._settled(outcome, reply)] += 1
        if applied:
            self._applied(applied)
            tally["committed"] += len(applied)
        return tally

    def _applied(self, commits: Sequence[Commit]) -> None:
        """Count committed effects once per flush: how many, their age at commit (from
        their stream entry ids), who decided each verdict (``driver_used``) and, for a
        model's verdict of a labelled message, whether it was right
        (:class:`~sentinel_platform.streams.consumer.outcome_metrics.OutcomeCounter`)."""
        self.metrics.inc("processed", len(commits))
        self.metrics.observe_commit_ages([c.delivery.id for c in commits])
        drivers = Counter(c.effect.log_fields.get("driver_used") for c in commits)
        for driver, count in drivers.items():
            if driver in VERDICT_DRIVERS:
                self.metrics.count_verdict(driver, count)
        for commit in commits:  # right or wrong, for labelled model verdicts
            self.metrics.outcomes.count(commit.effect.result)
        if log.isEnabledFor(logging.DEBUG):
            for commit in commits:
                details = {"message_id": commit.delivery.id, **commit.effect.log_fields}
                self.log.debug("processed", extra=details)

    def _send(self, outbox: Sequence[Outcome], client: RedisClient) -> list[tuple[Outcome, Any]]:
        """One pipeline: the batch's commits in few script calls, dead letters, errors."""
        commits = [o for o in outbox if isinstance(o, Commit)]
        pipe: TaggedPipeline[Sequence[Outcome]] = TaggedPipeline(client.pipeline(transaction=False))
        if commits:
            claims = self.keys if self.releases_claims else None
            items = [_commit_item(o, claims) for o in commits]
            pipe.queue(commits, lambda p: queue_commits(p, self.keys, items, self.limits))
        for outcome in outbox:
            if not isinstance(outcome, Commit):
                pipe.queue([outcome], self._queuer(outcome))
        settled: list[tuple[Outcome, Any]] = []
        for queued, replies in pipe.execute():
            settled.extend(zip(queued, _settled_replies(queued, replies), strict=True))
        return settled

    def _queuer(self, outcome: Outcome) -> Callable[[Any], None]:
        """What one outcome other than a commit sends, queued on a pipeline."""
        keys, settings, message_id = self.keys, self.settings, outcome.delivery.id
        if isinstance(outcome, DeadLetterOp):
            delivery = outcome.delivery
            letter = build_dead_letter(
                keys,
                message_id,
                delivery.fields,
                outcome.reason,
                outcome.error,
                delivery.deliveries,
                self.consumer,
            )
            ttl, maxlen = settings.idempotency_ttl_s, settings.dlq_maxlen
            return lambda pipe: queue_dead_letter(pipe, keys, letter, maxlen, ttl)
        if isinstance(outcome, Failure):
            error, ttl = outcome.error, settings.idempotency_ttl_s
            return lambda pipe: queue_error(pipe, keys, message_id, error, ttl)

        def acknowledge(pipe: Any) -> None:
            pipe.xack(keys.stream, keys.group, message_id)
            pipe.delete(attempt_key(keys, message_id))

        return acknowledge

    def _settled(self, outcome: Outcome, reply: Any) -> str:
        """Count and log an outcome other than an applied commit; its report field."""
        message_log = self.log.bind(message_id=outcome.delivery.id)
        if isinstance(outcome, Failure):
            return "failed"
        duplicate = isinstance(outcome, Commit) and reply == "duplicate"
        if duplicate or (isinstance(outcome, Acknowledge) and outcome.why == "duplicate"):
            self.metrics.inc("duplicate_acks")
            natural_key = outcome.natural_key  # type: ignore[union-attr]
            message_log.info("duplicate_ack", extra={"natural_key": natural_key})
            return "duplicates"
        if isinstance(outcome, Acknowledge) or reply == ALREADY_DEAD_LETTERED:
            message_log.info("already_dead_lettered")
            return "duplicates"
        if isinstance(outcome, Commit):
            message_log.warning("stale_commit")
            return "stale"
        if was_dead_lettered(reply):
            return self._dead_lettered(outcome, message_log)
        message_log.warning("stale_dead_letter", extra={"reason": outcome.reason})
        return "stale"

    def _dead_lettered(self, outcome: DeadLetterOp, message_log: BoundLogger) -> str:
        self.metrics.inc("dead_lettered")
        message_log.error(
            "dead_lettered",
            extra={
                "reason": outcome.reason,
                "error": outcome.error,
                "deliveries": outcome.delivery.deliveries,
                "dlq": self.keys.dlq,
            },
        )
        return "dead_lettered"

    def hand_back(self, rest: Sequence[Delivery], client: RedisClient | None = None) -> None:
        """Make unprocessed messages claimable at once, with their delivery counts restored.
        ``client`` as for :meth:`flush`."""
        if not rest:
            return
        by_count: dict[int, list[Any]] = {}  # ids, typed as the client's stub wants
        for delivery in rest:
            by_count.setdefault(max(delivery.deliveries - 1, 0), []).append(delivery.id)
        pipe = (client or self.client).pipeline(transaction=False)
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
        self.log.info(
            "handed_back",
            extra={"messages": len(rest), "holder": HANDBACK_CONSUMER},
        )


def _commit_item(commit: Commit, claims: StreamKeys | None) -> CommitItem:
    """The commit of ``commit``; with ``claims``, its key's claim is released with it.

    The result names the message it decides (``source_message_id``): the delivery's id,
    unless the effect names one itself (a re-screen's verdict names the message it
    re-screens, not the queue entry it was delivered as)."""
    delivery = commit.delivery
    effect = commit.effect
    source = effect.result.get("source_message_id") or delivery.id
    return CommitItem(
        delivery.id,
        commit.natural_key,
        {**effect.result, "source_message_id": source},
        effect.recent,
        clear_attempts=delivery.deliveries > 1,
        claim=claim_key(claims, commit.natural_key) if claims is not None else None,
        queue=effect.provisional,
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
