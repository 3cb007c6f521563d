"""What a batch needs before any processor call: triage, in at most two round trips.

For each message of a batch (first deliveries, redeliveries, or both) the decision is
one of: acknowledged without a call (dead-lettered before, because a group re-created at
0 reads its history again; or its natural key committed before), a dead letter decided
at once (bytes that are not UTF-8, an entry older than the markers, past the delivery
limit, content the parser rejects), a failure (the parser itself broke: retried), or due
for its call. The decisions are pure functions (:func:`before_parse`, :func:`sort`),
table-tested; :class:`Triage` does the look-ups around them:

* a batch of first deliveries (the hot path) is parsed first and looked up in one round
  trip (dead-lettered ids and markers; for a processor with paid calls the keys are
  claimed in the same round trip, the claim's marker check standing for the markers);
* a batch with redeliveries reads their attempt records first, because a redelivery's
  call is counted (and its delivery limit checked) before it is parsed, then the markers
  (then the claims).

What is due for a call comes back claimed (``claims.py``); a copy of a key another worker
claimed waits in :class:`~sentinel_platform.streams.consumer.calling.claims.Claims`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

from sentinel_platform.logs import BoundLogger
from sentinel_platform.schemas import SchemaError, describe_error
from sentinel_platform.settings import Settings
from sentinel_platform.streams.consumer.calling.claims import Claims
from sentinel_platform.streams.consumer.calling.processor_call import operator_interrupt
from sentinel_platform.streams.consumer.outcomes import (
    Acknowledge,
    DeadLetterOp,
    Delivery,
    Outcome,
    Prepared,
)
from sentinel_platform.streams.consumer.processor import Processor, check_natural_key
from sentinel_platform.streams.consumer.reading.entry_age import EXPIRED_MARKER_ERROR, entry_too_old
from sentinel_platform.streams.consumer.settling.attempts import (
    AttemptRecord,
    attempt_records,
    queue_read_attempts,
    record_call,
)
from sentinel_platform.streams.consumer.settling.dead_letter import (
    NO_ERROR_RECORDED,
    already_dead_lettered,
    queue_dead_check,
)
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform.streams.plumbing.undecodable import undecodable_error

log = logging.getLogger(__name__)

#: The decision before parsing: an outcome, "record" (a redelivery: count its call
#: first), or None (parse it).
Early = DeadLetterOp | str | None


def before_parse(delivery: Delivery, record: AttemptRecord | None, settings: Settings) -> Early:
    """Everything decided before parsing: undecodable, too old, past the delivery limit.

    The first delivery counts as one call and is never recorded (the hot path); a
    redelivery whose recorded calls reach ``SENTINEL_RECLAIM_DELIVERY_LIMIT`` is
    dead-lettered unprocessed, with the last error (``attempts.py``).
    """
    undecodable = undecodable_error(delivery.fields)
    if undecodable is not None:  # its bytes are kept exactly, as base64, in the DLQ
        return DeadLetterOp(delivery, "invalid_message", undecodable)
    if entry_too_old(delivery.id, settings):  # retention off: see entry_age.py
        return DeadLetterOp(delivery, "expired_marker", EXPIRED_MARKER_ERROR)
    if delivery.deliveries <= 1:
        return None
    calls = (record or AttemptRecord()).calls
    if calls + 1 >= settings.reclaim_delivery_limit:
        error = (record.last_error if record else None) or NO_ERROR_RECORDED
        return DeadLetterOp(delivery, "max_deliveries_exceeded", error)
    return "record"


def sort(
    parsed: Sequence[Prepared | Outcome], committed: set[str]
) -> tuple[list[Outcome], list[Prepared]]:
    """Split parsed messages into outcomes decided now and messages due for a call: a
    committed natural key is acknowledged as a duplicate without a call."""
    decided: list[Outcome] = []
    due: list[Prepared] = []
    for prepared in parsed:
        if not isinstance(prepared, Prepared):
            decided.append(prepared)
        elif prepared.natural_key in committed:
            decided.append(Acknowledge(prepared.delivery, "duplicate", prepared.natural_key))
        else:
            due.append(prepared)
    return decided, due


def marked(names: Sequence[str], markers: Sequence[Any]) -> set[str]:
    """The natural keys of ``names`` whose marker ``MGET`` found."""
    return {name for name, marker in zip(names, markers, strict=True) if marker is not None}


class Triage:
    """Parses and looks up a batch; returns what is decided and what is due for a call."""

    def __init__(
        self,
        client: RedisClient,
        keys: StreamKeys,
        processor: Processor,
        settings: Settings,
        consumer: str,
        failed: Callable[[Delivery, BaseException], Outcome],
        observe: Callable[[float], None],
        log_fields: dict[str, str],
        claims: Claims | None = None,
    ) -> None:
        self.claims = claims
        self.client = client
        self.keys = keys
        self.processor = processor
        self.settings = settings
        self.consumer = consumer
        self._failed = failed
        self._observe = observe
        self.log = BoundLogger(log, log_fields)

    def __call__(self, batch: Sequence[Delivery]) -> tuple[list[Outcome], list[Prepared]]:
        if any(delivery.deliveries > 1 for delivery in batch):
            return self._redelivered(batch)
        return self._first(batch)

    def _first(self, batch: Sequence[Delivery]) -> tuple[list[Outcome], list[Prepared]]:
        """First deliveries: parse, then one round trip for dead letters and markers."""
        parsed = [self._prepare(delivery, None) for delivery in batch]
        ids = [delivery.id for delivery in batch]
        names = _names(parsed)
        pipe = self.client.pipeline(transaction=False)
        queue_dead_check(pipe, self.keys, ids)
        if names and self.claims is not None:
            self.claims.queue_claim(pipe, names)  # its marker check is the MGET's
        elif names:
            # MGET by name: a cluster pipeline refuses its mget(), yet routes this call by
            # its keys, which share the stream's hash slot.
            pipe.execute_command("MGET", *(self.keys.marker(name) for name in names))
        replies = pipe.execute()
        dead = already_dead_lettered(ids, replies[0])
        kept = [_unless_dead(p, delivery, dead) for delivery, p in zip(batch, parsed, strict=True)]
        if not names:
            return sort(kept, set())
        if self.claims is None:
            return sort(kept, marked(names, replies[1]))
        flags = dict(zip(names, (int(f) for f in replies[1]), strict=True))
        decided, due = sort(kept, {name for name, flag in flags.items() if flag == 2})
        mine, done = self.claims.split(due, flags)
        return decided + done, mine

    def _redelivered(self, batch: Sequence[Delivery]) -> tuple[list[Outcome], list[Prepared]]:
        """A batch with redeliveries: their records first, then parse, then the markers."""
        ids = [d.id for d in batch]
        redelivered = [d.id for d in batch if d.deliveries > 1]
        pipe = self.client.pipeline(transaction=False)
        queue_dead_check(pipe, self.keys, ids)
        queue_read_attempts(pipe, self.keys, redelivered)
        dead_reply, *attempt_replies = pipe.execute()
        records = attempt_records(redelivered, attempt_replies)
        dead = already_dead_lettered(ids, dead_reply)
        parsed: list[Prepared | Outcome] = [
            Acknowledge(d, "already_dead_lettered")
            if d.id in dead
            else self._prepare(d, records.get(d.id))
            for d in batch
        ]
        names = _names(parsed)
        markers = self.client.mget([self.keys.marker(n) for n in names]) if names else []
        decided, due = sort(parsed, marked(names, markers))
        if self.claims is None:
            return decided, due
        mine, done = self.claims.take(due)
        return decided + done, mine

    def _prepare(self, delivery: Delivery, record: AttemptRecord | None) -> Prepared | Outcome:
        """The decision before parsing, then the parsed message and its natural key."""
        early = before_parse(delivery, record, self.settings)
        if isinstance(early, DeadLetterOp):
            return early
        if early == "record":  # before parsing and the call: a call that kills us counts
            self._record_call(delivery, (record or AttemptRecord()).calls)
        started = time.perf_counter()
        try:
            message = self.processor.parse(delivery.fields)
            natural_key = self.processor.natural_key(message)
            check_natural_key(natural_key)  # a plug-in's bug: retried, never sent as a key
        except SchemaError as exc:
            self._observe(time.perf_counter() - started)
            return DeadLetterOp(delivery, "invalid_message", describe_error(exc))
        except BaseException as exc:  # a parser error (sys.exit too) never kills the worker
            if operator_interrupt(exc):
                raise
            self._observe(time.perf_counter() - started)
            return self._failed(delivery, exc)
        return Prepared(delivery, message, natural_key, time.perf_counter() - started)

    def _record_call(self, delivery: Delivery, calls: int) -> None:
        """Count a redelivery's call before it is made (safe to send twice: see
        ``attempts.py``); ``calls``: the calls recorded before this one."""
        ttl = self.settings.idempotency_ttl_s
        record_call(self.client, self.keys, delivery.id, delivery.deliveries, ttl)
        if delivery.claimed_from == self.consumer:
            self.log.info(
                "retrying",
                extra={
                    "message_id": delivery.id,
                    "deliveries": delivery.deliveries,
                    "call": calls + 2,
                },
            )


def _names(parsed: Sequence[Prepared | Outcome]) -> list[str]:
    return list(dict.fromkeys(p.natural_key for p in parsed if isinstance(p, Prepared)))


def _unless_dead(parsed: Prepared | Outcome, delivery: Delivery, dead: set[str]) -> Any:
    """A message read again after its group was re-created is never processed twice."""
    if delivery.id in dead:
        return Acknowledge(delivery, "already_dead_lettered")
    return parsed
