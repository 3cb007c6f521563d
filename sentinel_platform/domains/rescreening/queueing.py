"""Queue a day's provisional verdicts for re-screening: the Redis side of a launch.

:func:`queue_day` reads the result stream and the re-screen queue, lets
:func:`~sentinel_platform.domains.rescreening.plan.plan` decide what to queue, reads each
message's wire fields back from its source stream (XRANGE of its one id) and appends one
queue entry per verdict in the contract's shape
(:mod:`~sentinel_platform.streams.backlog.provisional`): the fields as the stream carries
them plus ``sentinel_rescreen_of``, ``sentinel_source_id``, ``sentinel_cause`` and
``sentinel_day``. A message whose source entry is gone (trimmed, deleted) cannot be asked
about again: it is counted, and its verdict stays provisional.

The result stream is read before the queue. A worker writes a provisional verdict and its
queue entry in one commit, so a verdict seen in the results is in the queue by the time
the queue is read, and queueing twice never races the workers into a second entry. Two
launches for the same stream never queue at once: each holds a lease
(:func:`launch_lease`, with a deadline) while it reads and writes, and a second one fails
naming the run that holds it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from sentinel_platform.domains.rescreening.plan import Candidate, Plan, plan, without_waiting
from sentinel_platform.streams.backlog.provisional import (
    QUEUE_CAUSE,
    QUEUE_DAY,
    QUEUE_RESULT_ID,
    QUEUE_SOURCE_ID,
)
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform.streams.plumbing.replies import Entry, entries, optional_text

#: Entries read per XRANGE page, and commands per pipeline.
PAGE = 1000
#: How long a launch's lease lasts unless released: longer than any launch reads.
LEASE_MS = 15 * 60 * 1000
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


class LaunchInProgress(RuntimeError):
    """Another launch is queueing the same stream's provisional verdicts."""


@dataclass(frozen=True)
class Queued:
    """What a launch did: the verdicts it queued, those whose source entry is gone (their
    results entry ids), and those it left (superseded, already waiting)."""

    queued: int
    source_gone: tuple[str, ...]
    superseded: int
    waiting: int


def scan(client: RedisClient, stream: str) -> Iterator[Entry]:
    """Every entry of ``stream`` in id order, read in pages of :data:`PAGE`."""
    start = "-"
    while True:
        page = entries(client.xrange(stream, min=start, max="+", count=PAGE))
        yield from page
        if len(page) < PAGE:
            return
        start = f"({page[-1][0]}"


def queued_result_ids(client: RedisClient, queue: str) -> set[str]:
    """The results entry ids the re-screen queue names (waiting or being re-screened)."""
    return {
        fields[QUEUE_RESULT_ID] for _, fields in scan(client, queue) if QUEUE_RESULT_ID in fields
    }


def lease_key(keys: StreamKeys) -> str:
    """The launch lease of ``keys``'s stream, in the queue's hash slot."""
    return f"{keys.rescreen}:launch"


@contextmanager
def launch_lease(client: RedisClient, keys: StreamKeys, owner: str) -> Iterator[None]:
    """Hold the stream's launch lease for the block (at most :data:`LEASE_MS`), or raise
    :class:`LaunchInProgress` naming its holder; released only by its owner."""
    key = lease_key(keys)
    if not client.set(key, owner, nx=True, px=LEASE_MS):
        holder = optional_text(client.get(key)) or "another launch"
        raise LaunchInProgress(
            f"the re-screen queue {keys.rescreen} is being filled by {holder}; "
            "launch again once it has finished"
        )
    try:
        yield
    finally:
        client.eval(_RELEASE, 1, key, owner)


def _sources(client: RedisClient, stream: str, wanted: Sequence[Candidate]) -> list[Entry | None]:
    """Each candidate's source entry (XRANGE of its one id), None where it is gone."""
    found: list[Entry | None] = []
    for start in range(0, len(wanted), PAGE):
        pipe = client.pipeline(transaction=False)
        for candidate in wanted[start : start + PAGE]:
            pipe.xrange(stream, min=candidate.source_id, max=candidate.source_id)
        for reply in pipe.execute():
            page = entries(reply)
            found.append(page[0] if page else None)
    return found


def queue_entry(candidate: Candidate, wire: dict[str, str]) -> dict[str, str]:
    """The queue entry of ``candidate``: its message's wire fields and the queue fields."""
    return {
        **wire,
        QUEUE_RESULT_ID: candidate.result_id,
        QUEUE_SOURCE_ID: candidate.source_id,
        QUEUE_CAUSE: candidate.cause,
        QUEUE_DAY: candidate.day,
    }


def _enqueue(client: RedisClient, keys: StreamKeys, decided: Plan) -> Queued:
    sources = _sources(client, keys.stream, decided.queue)
    gone = tuple(c.result_id for c, s in zip(decided.queue, sources, strict=True) if s is None)
    ready = [(c, s[1]) for c, s in zip(decided.queue, sources, strict=True) if s is not None]
    for start in range(0, len(ready), PAGE):
        pipe = client.pipeline(transaction=False)
        for candidate, wire in ready[start : start + PAGE]:
            entry: dict[Any, Any] = queue_entry(candidate, wire)
            pipe.xadd(keys.rescreen, entry)
        pipe.execute()
    return Queued(len(ready), gone, decided.superseded, decided.waiting)


def queue_day(client: RedisClient, keys: StreamKeys, day: str, owner: str) -> Queued:
    """Queue ``day``'s provisional verdicts of ``keys``'s stream that are neither
    superseded nor waiting, under the stream's launch lease held by ``owner``. The
    results are read before the queue (see the module's docstring)."""
    with launch_lease(client, keys, owner):
        decided = plan(scan(client, keys.results), day)
        decided = without_waiting(decided, queued_result_ids(client, keys.rescreen))
        return _enqueue(client, keys, decided)
