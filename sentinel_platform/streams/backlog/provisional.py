"""Provisional verdicts: rules fallbacks that wait for the model to decide them again.

A verdict the rules made only because the analyzer could not be asked (down, its breaker
open, the fleet held, the provider exhausted, the budget spent) is *provisional*: the
result entry says so (:data:`PROVISIONAL` ``"true"`` and its :data:`FALLBACK_CAUSE`), and
the message's input goes into its stream's re-screen queue (``StreamKeys.rescreen``, a
Redis stream in the stream's own hash slot) in the same atomic commit as the verdict. Once
the analyzer is back, the workers ask the model about each queued message and write the
model's verdict as a new result entry naming the one it supersedes (:data:`RESCREEN_OF`):
both are kept, the newest model verdict is the message's decision.

A fallback for a reason of the message's own (the model refused it: ``refused``; it billed
an answer that was no verdict: ``unusable``) is final: asking again would be refused
again, so it is not provisional.

A batch-lane message the provider gave no verdict for, decided by the rules, is final too
(:data:`BATCH_CAUSES`, ``batch_`` and the reason, :func:`batch_cause`): the batch lane
carries past data nobody waits for, and a re-screen would ask the model in real time at
full price. :data:`BATCH_CAUSE_TEXT` names each for what the provider did, so every
reader of the causes (``sentinel status``, the ``ai_verdicts`` check, ``sentinel
verdict``) says the same words.

The queue is consumed by the stream's own consumer group (``StreamKeys.group``) and its
acknowledged entries are trimmed from below, so what waits is the group's lag plus its
pending entries, and the oldest waiting entry is the older of the first pending one and
the first not yet delivered. :func:`read_provisional` reads that for ``sentinel status``,
the exporter and the Dagster sensors; every reader sees the same two figures.

A queue entry holds the message's wire fields as its stream carries them
(``WireModel.to_fields``) plus the :data:`QUEUE_FIELDS`, whose ``sentinel_`` prefix keeps
them apart from any wire field; :func:`payload_of` gives the wire fields back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Literal, cast

import redis

from sentinel_platform.streams.backlog.entry_ages import entry_time_s, server_now_s
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform.streams.plumbing.replies import entries

#: Result field: ``"true"`` on a fallback verdict that waits for the model.
PROVISIONAL = "provisional"
#: Result field of every fallback verdict: why the rules decided (a :data:`FallbackCause`).
FALLBACK_CAUSE = "fallback_cause"
#: Result field of a model's verdict made by re-screening: the results entry id of the
#: provisional verdict it supersedes.
RESCREEN_OF = "rescreen_of"
#: Result field of every verdict: the data's day (``YYYY-MM-DD``, UTC), the daily
#: partition the message belongs to (a transaction's ``timestamp``, an axiom's
#: ``emitted_at``), which the cost and quality figures group by.
DAY = "day"

FallbackCause = Literal[
    "down",
    "breaker_open",
    "held",
    "exhausted",
    "over_budget",
    "refused",
    "unusable",
    "batch_errored",
    "batch_expired",
    "batch_canceled",
    "batch_unanswered",
    "batch_failed",
    "batch_refused",
]
#: The causes that make a fallback provisional: the analyzer could not be asked.
PROVISIONAL_CAUSES: frozenset[str] = frozenset(
    {"down", "breaker_open", "held", "exhausted", "over_budget"}
)
#: What the provider did to a batch-lane message the rules then decided (final), in
#: words that follow "the batch lane's requests".
BATCH_CAUSE_TEXT: dict[str, str] = {
    "batch_errored": "errored at the provider",
    "batch_expired": "expired at the provider",
    "batch_canceled": "canceled at the provider",
    "batch_unanswered": "left unanswered by the provider",
    "batch_failed": "in a batch that failed as a whole",
    "batch_refused": "in a batch the provider refused",
}
#: The causes of the batch lane's fallbacks: final, never re-screened.
BATCH_CAUSES: frozenset[str] = frozenset(BATCH_CAUSE_TEXT)

#: Queue entry field: the results entry id of the provisional verdict.
QUEUE_RESULT_ID = "sentinel_rescreen_of"
#: Queue entry field: the id of the message in its source stream.
QUEUE_SOURCE_ID = "sentinel_source_id"
#: Queue entry field: the fallback's cause.
QUEUE_CAUSE = "sentinel_cause"
#: Queue entry field: the data's day (:data:`DAY`).
QUEUE_DAY = "sentinel_day"
QUEUE_FIELDS = (QUEUE_RESULT_ID, QUEUE_SOURCE_ID, QUEUE_CAUSE, QUEUE_DAY)


def day_of(stamp: str) -> str:
    """The UTC day (``YYYY-MM-DD``) of an ISO-8601 time (one without an offset is UTC):
    the daily partition a message belongs to, as its verdicts record it (:data:`DAY`)."""
    parsed = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=timezone.utc)
    return parsed.astimezone(timezone.utc).date().isoformat()


def is_provisional_cause(cause: str) -> bool:
    """Whether a fallback for ``cause`` waits for the model (:data:`PROVISIONAL_CAUSES`)."""
    return cause in PROVISIONAL_CAUSES


def batch_cause(why: str) -> FallbackCause:
    """The cause of the rules' fallback of a batch-lane message that got no verdict for
    ``why`` (``expired``: ``batch_expired``). ``ValueError`` for a reason that makes no
    fallback (a batch ``held`` by the provider's queue limit goes back to the lane)."""
    cause = f"batch_{why}"
    if cause not in BATCH_CAUSES:
        raise ValueError(f"no batch fallback for {why!r}")
    return cast(FallbackCause, cause)


def payload_of(fields: Mapping[str, str]) -> dict[str, str]:
    """A queue entry's wire fields: ``fields`` without the :data:`QUEUE_FIELDS`."""
    return {name: value for name, value in fields.items() if name not in QUEUE_FIELDS}


@dataclass(frozen=True)
class ProvisionalBacklog:
    """What waits in one re-screen queue: how many verdicts, and the oldest one's age."""

    waiting: int
    oldest_age_s: float | None

    def as_dict(self) -> dict[str, float | int | None]:
        return {"waiting": self.waiting, "oldest_age_s": self.oldest_age_s}


NOTHING = ProvisionalBacklog(0, None)


def read_provisional(client: RedisClient, keys: StreamKeys) -> ProvisionalBacklog:
    """The re-screen queue of ``keys``: its waiting entries and the oldest one's age on
    the server's clock. No queue yet: nothing waits. Before its consumer group exists
    (no worker has re-screened yet), every entry waits."""
    queue = keys.rescreen
    if not queue or not client.exists(queue):
        return NOTHING
    group = _group_info(client, queue, keys.group)
    if group is None:
        first = _first_after(client, queue, "-")
        return _backlog(client, int(client.xlen(queue)), first)
    pending, lag, last = group
    if lag is None:  # the server cannot tell (entries deleted after the last delivered)
        lag = len(entries(client.xrange(queue, min=f"({last}", max="+")))
    oldest = _oldest_pending(client, queue, keys.group) if pending else None
    if oldest is None and lag:
        oldest = _first_after(client, queue, f"({last}")
    return _backlog(client, pending + lag, oldest)


def _backlog(client: RedisClient, waiting: int, oldest: str | None) -> ProvisionalBacklog:
    if not waiting or oldest is None:
        return ProvisionalBacklog(waiting, None)
    age = max(0.0, server_now_s(client) - entry_time_s(oldest))
    return ProvisionalBacklog(waiting, round(age, 3))


def _group_info(client: RedisClient, queue: str, group: str) -> tuple[int, int | None, str] | None:
    try:
        groups = client.xinfo_groups(queue)
    except redis.ResponseError:
        return None
    for info in groups:
        name = info.get("name")
        if (name.decode() if isinstance(name, bytes) else name) != group:
            continue
        last = info.get("last-delivered-id") or "0-0"
        last = last.decode() if isinstance(last, bytes) else str(last)
        lag = info.get("lag")
        return int(info.get("pending") or 0), None if lag is None else int(lag), last
    return None


def _oldest_pending(client: RedisClient, queue: str, group: str) -> str | None:
    rows = client.xpending_range(queue, group, min="-", max="+", count=1)
    if not rows:
        return None
    first = rows[0]["message_id"]
    return first.decode() if isinstance(first, bytes) else str(first)


def _first_after(client: RedisClient, queue: str, start: str) -> str | None:
    found = entries(client.xrange(queue, min=start, max="+", count=1))
    return found[0][0] if found else None
