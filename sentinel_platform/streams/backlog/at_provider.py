"""The batch lane's backlog: messages waiting for a batch, messages at the provider, and
the oldest batch, counted apart from the stream's lag.

A partition published for the batch lane waits in the stream's batch lane
(``batch_stream_key``) until a worker cuts it into batches for the provider's batch API,
which answers within its completion window (:data:`COMPLETION_WINDOW_S`, 24 hours for
OpenAI and Anthropic). Nobody waits for those verdicts within seconds, so they are never
lag: they never pause a publish nor raise a lag alert. They are shown apart, read here
from the batch lane and the workers' batch ledger in Redis (the layout below
``batches_key``, read without the workers' code):

* *waiting*: the batch lane's entries the stream's group has not acknowledged (its lag
  plus its pending entries; every entry before the group exists), less the messages of
  the batches in the ledger that are at the provider;
* *at the provider*: the messages of the batches ``recorded`` (being submitted),
  ``submitted`` or ``ended`` (results being committed); a ``refused`` batch's messages
  go another way and count as waiting;
* the oldest batch in the ledger: its age on the server's clock, state and the
  provider's own status at the last poll (``provider_status``).

:func:`summarise` is the pure part; :func:`read_at_provider` reads one stream's (or one
shard's) keys, :func:`read_shards_at_provider` a sharded stream's shards, summed.
:func:`overdue` judges the oldest batch against the completion window: a batch the
provider should have ended long ago is an alert of its own, never lag.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Literal

import redis

from sentinel_platform.streams.backlog.entry_ages import server_now_s
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, batch_stream_key, batches_key

#: The providers' completion window: a batch still in the ledger after it is overdue.
COMPLETION_WINDOW_S = 86_400.0
#: The ledger states whose messages are at the provider (or on their way to or from it).
AT_PROVIDER_STATES = frozenset({"recorded", "submitted", "ended"})
Overdue = Literal["ok", "WARN", "ERROR"]


@dataclass(frozen=True)
class BatchBacklog:
    """One stream's batch lane: messages waiting for a batch, messages at the provider,
    the batches in the ledger, and the oldest one's age, state and provider status."""

    waiting: int = 0
    at_provider: int = 0
    batches: int = 0
    oldest_age_s: float | None = None
    oldest_state: str | None = None
    provider_status: str | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


NOTHING = BatchBacklog()


def summarise(unacked: int, records: Iterable[Mapping[str, str]], now_ms: int) -> BatchBacklog:
    """The backlog of a batch lane with ``unacked`` entries not acknowledged by the group,
    whose ledger holds ``records`` (each batch's record hash; an empty one, settled
    while read, is skipped), at ``now_ms`` on the server's clock."""
    present = [r for r in records if r.get("state")]
    at_provider = sum(_int(r.get("count")) for r in present if r["state"] in AT_PROVIDER_STATES)
    oldest = min(present, key=lambda r: _int(r.get("created_ms")), default=None)
    if oldest is None:
        return BatchBacklog(waiting=max(0, unacked))
    age_s = max(0.0, (now_ms - _int(oldest.get("created_ms"))) / 1000)
    return BatchBacklog(
        waiting=max(0, unacked - at_provider),
        at_provider=at_provider,
        batches=len(present),
        oldest_age_s=round(age_s, 3),
        oldest_state=oldest["state"],
        provider_status=oldest.get("provider_status") or None,
    )


def combined(backlogs: Iterable[BatchBacklog]) -> BatchBacklog:
    """Several shards' backlogs as one: counts summed, the oldest batch the oldest of all."""
    parts = list(backlogs)
    aged = [b for b in parts if b.oldest_age_s is not None]
    oldest = max(aged, key=lambda b: b.oldest_age_s or 0.0, default=NOTHING)
    return BatchBacklog(
        waiting=sum(b.waiting for b in parts),
        at_provider=sum(b.at_provider for b in parts),
        batches=sum(b.batches for b in parts),
        oldest_age_s=oldest.oldest_age_s,
        oldest_state=oldest.oldest_state,
        provider_status=oldest.provider_status,
    )


def overdue(backlog: BatchBacklog, window_s: float = COMPLETION_WINDOW_S) -> Overdue:
    """``WARN`` when the oldest batch is older than its completion window (the provider
    should have ended or expired it: late, or nobody polls it), ``ERROR`` past twice the
    window (no provider keeps a batch that long: its worker is gone), else ``ok``."""
    age = backlog.oldest_age_s
    if age is None or age <= window_s:
        return "ok"
    return "ERROR" if age > 2 * window_s else "WARN"


def overdue_text(backlog: BatchBacklog, window_s: float = COMPLETION_WINDOW_S) -> str | None:
    """The sentence an overdue oldest batch is told with; None when none is overdue."""
    level = overdue(backlog, window_s)
    if level == "ok" or backlog.oldest_age_s is None:
        return None
    status = backlog.provider_status or "not polled yet"
    return (
        f"{level}: the oldest batch ({backlog.oldest_state}, provider status {status}) is "
        f"{backlog.oldest_age_s / 3600:.1f} h old, past its {window_s / 3600:.0f} h "
        "completion window: the provider is late or no worker polls it"
    )


def read_at_provider(client: RedisClient, keys: StreamKeys) -> BatchBacklog:
    """The batch lane of ``keys`` (a stream's, or one shard's): one read of its group
    and one of its ledger, on the server's clock."""
    unacked = _unacked(client, batch_stream_key(keys), keys.group)
    ledger = batches_key(keys)
    ids = [_text(i) for i in client.zrange(ledger, 0, -1)]
    if not ids and not unacked:
        return NOTHING
    records: Sequence[Mapping[str, str]] = ()
    if ids:
        pipe = client.pipeline(transaction=False)
        for local_id in ids:
            pipe.hgetall(f"{ledger}:{local_id}")
        records = [_decoded(r) for r in pipe.execute()]
    return summarise(unacked, records, int(server_now_s(client) * 1000))


def read_shards_at_provider(client: RedisClient, shards: Iterable[StreamKeys]) -> BatchBacklog:
    """The batch lane of a stream whose shards' keys are ``shards``, summed over them."""
    return combined(read_at_provider(client, keys) for keys in shards)


def _unacked(client: RedisClient, stream: str, group: str) -> int:
    """Entries of ``stream`` the group has not acknowledged: its lag plus its pending;
    before the group exists every entry; no stream, none."""
    try:
        groups = client.xinfo_groups(stream)
    except redis.ResponseError:  # no such stream
        return 0
    for info in groups:
        if _text(info.get("name")) != group:
            continue
        pending = int(info.get("pending") or 0)
        lag = info.get("lag")
        if lag is None:  # the server cannot tell: count what follows the last delivered
            last = _text(info.get("last-delivered-id") or "0-0")
            lag = len(client.xrange(stream, min=f"({last}", max="+") or [])
        return pending + int(lag)
    return int(client.xlen(stream))


def _int(value: object) -> int:
    try:
        return int(str(value))
    except ValueError:
        return 0


def _text(value: object) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _decoded(record: Mapping[Any, Any]) -> dict[str, str]:
    return {_text(k): _text(v) for k, v in (record or {}).items()}
