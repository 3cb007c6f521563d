"""The contract between the consumer loop and a domain processor.

The loop owns delivery: reading, recovery, retries, dead letters, acknowledgement. A
processor owns meaning: it parses a message (raising :class:`SchemaError` for anything
that does not fit, which sends the message to the DLQ at once) and turns it into an
:class:`Effect`. The loop then commits the effect, the idempotency marker for the
message's natural key and the XACK in one atomic step, so a redelivered message never
has a second effect.

A processor whose downstream is at capacity raises :class:`Busy` instead of failing: that
is backpressure, not an error, and the loop treats it apart from every other exception.
One that meets a message no retry can process raises :class:`Unprocessable`, which
dead-letters it at once.

What a processor hands back must be committable as it is (:func:`check_natural_key`,
:func:`check_effect`): a key or a value the client cannot send is the processor's bug,
an :class:`InvalidEffectError`, checked where the call ends so it is a failure of that
message and never an exception out of a commit. The checks live with the contract they
enforce, so every part of the consumer may apply them.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

#: thread id -> seconds of turn waits reported by the call in progress on that thread;
#: each thread writes only its own entry (single dict operations, atomic in CPython) and
#: the hang watchdog's thread reads them all.
_turn_waits: dict[int, float] = {}
#: Value types of a result field that are sent as they are (str, and numbers as text).
FIELD_TYPES = (str, int, float)


def waited_for_turn(seconds: float) -> None:
    """Tell the consumer that the call in progress on this thread spends ``seconds``
    waiting for its turn (a fleet rate-limit slot), not at the downstream. Reported
    before the wait starts, so it counts from its first moment.

    The consumer leaves that time out of the call's latency sample: the in-flight limit
    reads latency growth as a queue at the service and cuts, and a wait for a slot is no
    such queue (cutting for it would leave too few calls in flight to use the slots). The
    hang watchdog leaves it out too (:func:`turn_wait_of`): a call paced by the fleet's
    rate limit is not hung, however low the rate.
    """
    ident = threading.get_ident()
    _turn_waits[ident] = _turn_waits.get(ident, 0.0) + max(0.0, seconds)


def take_turn_wait() -> float:
    """The seconds reported by :func:`waited_for_turn` on this thread since the last
    call, and reset to zero (the consumer calls it after each processor call)."""
    return _turn_waits.pop(threading.get_ident(), 0.0)


def turn_wait_of(ident: int) -> float:
    """The seconds of turn waits the call in progress on thread ``ident`` reported so far
    (read by the hang watchdog from its own thread)."""
    return _turn_waits.get(ident, 0.0)


class Busy(Exception):
    """The downstream is at capacity: call again for this message later.

    Raised by :meth:`Processor.process` when a service it depends on said "not now"
    (HTTP 429, a 503 with ``Retry-After``, a fleet-wide hold or rate limit, no local
    connection free in time). It is not a failure, so the consumer loop, on catching it:

    * keeps the message pending in this worker's name (it stays in the lag, and a dead
      worker's waiting messages are recovered like any other pending message);
    * lowers its in-flight limit (the downstream's capacity is below what it sends);
    * waits ``retry_after_s`` before calling again for this message, or a backoff of its
      own choosing when it is None, and hands the message back within the shutdown
      timeout on a stop rather than finishing the wait;
    * re-calls :meth:`Processor.process` for the same message without counting a
      delivery attempt, never dead-letters it for being busy, never records it as a
      failure, and does not count the wait against the hang watchdog.

    ``reason`` says who is busy and why, for logs; it never carries a credential.
    ``sent`` is False for a subclass raised before anything reached the downstream (a
    fleet-wide hold, no local connection free): that says nothing new about the
    downstream's capacity, so the limit is not cut for it. ``shared_refusal`` is True for
    one raised because *another* caller was refused (the fleet's ``Retry-After`` hold):
    the limit then stops growing for a while (``on_hold``) without a cut, so that the
    workers sharing a service converge to fair shares of it instead of the ones never
    refused growing into the others' shares.
    """

    #: the call reached the downstream, which answered "busy" (a capacity signal)
    sent = True
    #: not sent because another caller of the downstream was refused just now
    shared_refusal = False

    def __init__(self, retry_after_s: float | None, reason: str) -> None:
        super().__init__(reason)
        self.retry_after_s = None if retry_after_s is None else max(0.0, float(retry_after_s))
        self.reason = reason

    def __reduce__(self) -> tuple[type[Busy], tuple[float | None, str]]:
        return (type(self), (self.retry_after_s, self.reason))


class Unprocessable(Exception):
    """This message can be processed neither now nor on any retry, and no other way of
    deciding it is allowed (a downstream refused it for what it is, such as a memo too
    long for the analyzer's model, and the settings forbid deciding it without that
    downstream). Raised by :meth:`Processor.process`; the loop dead-letters the message
    at once (reason ``unprocessable``, the exception's text as the error, the whole
    payload kept) instead of retrying it to the delivery limit, where the same refusal
    would only be repeated."""


@dataclass(frozen=True)
class Effect:
    """What processing one message produces.

    ``natural_key`` must equal the processor's ``natural_key(message)``: the worker checks
    it before committing, so an effect built for another message (a processor bug) is
    retried and then dead-lettered instead of marking the wrong key done. ``result``
    becomes one entry of the stream's result stream (string fields); ``recent``, when
    set, is pushed on the stream's capped "recent" list (newest first).

    ``sample`` is False when the call's wall time says nothing about the downstream the
    processor depends on: it was not asked, or gave no answer, and the processor decided
    alone (a rules fallback of a down analyzer, an open breaker, a message below the
    audit threshold). The in-flight limit then learns nothing from the call: an instant
    fallback read as a latency would teach it a no-load latency of milliseconds, and
    the service's real 100 ms afterwards would read as a queue and cut the limit to 1.
    A processor without a downstream leaves it True: its own time is what it measures.

    ``provisional``, when set, is the entry of the stream's re-screen queue
    (``StreamKeys.rescreen``) that the result's commit adds atomically with it: the
    message's wire fields and the queue's ``sentinel_cause`` and ``sentinel_day``; the
    commit adds the result's own entry id and the message's id
    (:mod:`~sentinel_platform.streams.backlog.provisional`). None: nothing is queued.
    """

    natural_key: str
    result: Mapping[str, str]
    recent: str | None = None
    log_fields: Mapping[str, Any] = field(default_factory=dict)
    sample: bool = True
    provisional: Mapping[str, str] | None = None


class Processor(Protocol):
    """A domain processor. Implementations must be safe to call again for the same message.

    Optionally it has ``bind_metrics(metrics)``: the worker calls it once with its
    :class:`~sentinel_platform.streams.consumer.metrics.Metrics` before the first message, so the
    processor can count what only it sees (the analyzer's calls and circuit breaker).
    Optionally it has ``paid_calls``: true when its calls cost money or a scarce service's
    capacity (an analyzer), so the worker claims each natural key across the fleet before
    calling and a copy on another worker waits for the first's commit instead
    (``claims.py``).
    Optionally it has ``bind_redis(client)``: the worker calls it once with its Redis
    client before the first message, so the processor can share limits with the rest of
    the fleet (the analyzer's ``Retry-After`` hold and rate limit); without the call those
    limits are per process.
    Optionally it has ``bind_stop(stop)``: the worker calls it once with its stop event
    (set on SIGTERM/SIGINT), so a wait of the processor's own (a rate-limit slot) ends on
    a stop instead of delaying it, and no call is made after it.
    """

    #: Short name used in logs and metrics ("transactions", "axioms").
    name: str

    def parse(self, fields: Mapping[str, str]) -> Any:
        """Validate a stream entry; raise ``SchemaError`` naming the bad field."""
        ...

    def natural_key(self, message: Any) -> str:
        """The key that makes an effect idempotent (a transaction's id, an axiom's
        source_id + emitted_at)."""
        ...

    def process(self, message: Any) -> Effect:
        """Compute the effect. :class:`Busy` means "call again later" (see there); any
        other exception leaves the message pending for a retry."""
        ...


class InvalidEffectError(TypeError):
    """A processor returned an effect that cannot be committed (a processor bug)."""


def check_natural_key(natural_key: Any) -> None:
    """Raise :class:`InvalidEffectError` unless ``natural_key`` can name a marker: a
    non-empty string (a plug-in returning anything else has a bug; retried, then
    dead-lettered, never committed under a key the client cannot send)."""
    if type(natural_key) is not str or not natural_key:
        raise InvalidEffectError(f"the natural key {natural_key!r} is not a non-empty string")


def check_effect(result: Mapping[str, Any], recent: Any) -> None:
    """Raise :class:`InvalidEffectError` unless the effect can be committed as it is.

    ``result`` needs at least one field, string names and str/int/float values (not
    bool, which the client refuses); ``recent`` is a string or None.
    """
    if not (type(result) is dict or isinstance(result, Mapping)) or not result:
        raise InvalidEffectError("the effect's result has no fields")
    for name, value in result.items():
        if type(name) is str and type(value) is str:
            continue  # the common case, decided without the general checks below
        if not isinstance(name, str):
            raise InvalidEffectError(f"result field name {name!r} is not a string")
        if isinstance(value, bool) or not isinstance(value, FIELD_TYPES):
            raise InvalidEffectError(
                f"result field {name!r} is a {type(value).__name__}, not a string or a number"
            )
    if recent is not None and not isinstance(recent, str):
        raise InvalidEffectError(f"the effect's recent entry is a {type(recent).__name__}")
