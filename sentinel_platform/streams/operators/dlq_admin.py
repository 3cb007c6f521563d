"""Operator actions on the dead-letter queue: list, show, replay, purge.

Every dead letter is a stream entry with the full payload, so an operator can inspect it
and, once the cause is fixed, put it back. Replay is the delicate part: it must never lose
a message and never publish one twice. One Lua script therefore checks that the DLQ entry
still exists, XADDs the original fields to the source stream as a NEW message (fresh
delivery count) and XDELs the DLQ entry, atomically. Replaying the same entry twice
publishes once, and the entry leaves the DLQ only if the re-publish happened. On a Redis
Cluster the DLQ of a stream shares the stream's hash slot (see :mod:`keys`), so the script
stays single-slot.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from typing import Literal

import redis

from sentinel_platform.settings import Settings
from sentinel_platform.streams.operators.dlq_entry import DlqEntry, entry_from_fields
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import all_stream_keys, stream_keys
from sentinel_platform.streams.plumbing.replies import entries
from sentinel_platform.streams.sharding.shards import dlq_streams_of

#: Field added to a replayed message: the id it had when it was dead-lettered.
REPLAYED_FROM_FIELD = "_replayed_from"
#: Field added to a replayed message: how many times it has been replayed (loop detector).
REPLAY_COUNT_FIELD = "_replays"
PAGE_SIZE = 500

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*([smhdw])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86_400, "w": 604_800}

# KEYS[1] = DLQ stream, KEYS[2] = source stream, KEYS[3] = the DLQ's replayed ids;
# ARGV[1] = DLQ entry id, ARGV[2] = how long replayed ids are remembered (ms),
# ARGV[3..] = fields. Returns the new id; {when replayed (ms)} for an id replayed before;
# false for an id that is neither in the DLQ nor remembered.
_REPLAY_LUA = """
if #redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1]) == 0 then
  local before = redis.call('ZSCORE', KEYS[3], ARGV[1])
  if before then return {before} end
  return false
end
local new_id = redis.call('XADD', KEYS[2], '*', unpack(ARGV, 3))
redis.call('XDEL', KEYS[1], ARGV[1])
local now = redis.call('TIME')
local now_ms = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
redis.call('ZADD', KEYS[3], now_ms, ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[3], '-inf', now_ms - tonumber(ARGV[2]))
redis.call('PEXPIRE', KEYS[3], ARGV[2])
return new_id
"""


class DlqError(ValueError):
    """A DLQ request cannot be carried out (bad filter, unknown id, unsafe replay)."""


@dataclass(frozen=True)
class DlqFilter:
    """Which dead letters an operation applies to. Empty filter = all of them."""

    stream: str | None = None
    reason: str | None = None
    since: datetime | None = None
    limit: int | None = None

    @property
    def is_empty(self) -> bool:
        return self.stream is None and self.reason is None and self.since is None


ReplayStatus = Literal["replayed", "would_replay", "already_replayed", "gone", "refused"]


@dataclass
class ReplayOutcome:
    """What happened to one entry: ``replayed`` (with ``new_id``), ``would_replay``
    (dry run), ``already_replayed`` (by an earlier replay, at ``replayed_at``), ``gone``
    (purged, trimmed, or replayed longer ago than replayed ids are remembered) or
    ``refused``."""

    entry_id: str
    status: ReplayStatus
    stream: str | None = None
    new_id: str | None = None
    detail: str | None = None
    replayed_at: datetime | None = None


@dataclass
class ReplaySummary:
    outcomes: list[ReplayOutcome] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for outcome in self.outcomes if outcome.status == status)


Progress = Callable[[int], None]


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """``--since``: an ISO-8601 instant (UTC when naive) or a duration back from now
    (``90s``, ``15m``, ``2h``, ``1d``, ``1w``)."""
    now = now or datetime.now(timezone.utc)
    match = _DURATION.match(text.strip().lower())
    if match:
        return now - timedelta(seconds=float(match[1]) * _UNIT_SECONDS[match[2]])
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00"))
    except ValueError:
        raise DlqError(
            f"--since {text!r} is neither an ISO-8601 time (2024-05-01T12:00:00Z) "
            "nor a duration (30s, 15m, 2h, 1d, 1w)"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=timezone.utc)


def replayed_key(dlq: str) -> str:
    """The sorted set of ``dlq``'s replayed entry ids (score: when, in ms). It shares the
    DLQ's hash tag, so the replay script stays single-slot on a cluster."""
    return f"{dlq}:replayed"


def _matches(entry: DlqEntry, filt: DlqFilter) -> bool:
    if filt.stream is not None and entry.source_stream != filt.stream:
        return False
    if filt.since is not None and entry.dead_lettered_at < filt.since:
        return False  # an imported entry: its id is recent, its dead-lettering is not
    return filt.reason is None or entry.reason == filt.reason


def _min_id(since: datetime | None) -> str:
    return "-" if since is None else f"{int(since.timestamp() * 1000)}-0"


def _scan(client: RedisClient, dlq: str, since: datetime | None) -> Iterator[DlqEntry]:
    """Every entry of one DLQ stream from ``since`` on, oldest first, paged."""
    low = _min_id(since)
    while True:
        page = entries(client.xrange(dlq, min=low, max="+", count=PAGE_SIZE))
        for entry_id, fields in page:
            yield entry_from_fields(dlq, entry_id, fields)
        if len(page) < PAGE_SIZE:
            return
        low = f"({page[-1][0]}"


def iter_entries(client: RedisClient, settings: Settings, filt: DlqFilter) -> Iterator[DlqEntry]:
    """Matching dead letters, oldest first within each DLQ stream, at most ``filt.limit``."""
    produced = 0
    for dlq in dlq_streams_of(client, settings):
        for entry in _scan(client, dlq, filt.since):
            if filt.limit is not None and produced >= filt.limit:
                return
            if _matches(entry, filt):
                produced += 1
                yield entry


def list_entries(client: RedisClient, settings: Settings, filt: DlqFilter) -> list[DlqEntry]:
    return list(iter_entries(client, settings, filt))


def depth(client: RedisClient, settings: Settings) -> dict[str, int]:
    """Entries per DLQ stream (XLEN, constant time)."""
    return {dlq: int(client.xlen(dlq)) for dlq in dlq_streams_of(client, settings)}


def get_entry(client: RedisClient, settings: Settings, ref: str) -> DlqEntry:
    """One entry by id; ``DLQ/ID`` disambiguates when several DLQ streams exist."""
    dlqs = dlq_streams_of(client, settings)
    if "/" in ref:
        dlq, entry_id = ref.rsplit("/", 1)
        if dlq not in dlqs:
            raise DlqError(f"{dlq!r} is not a DLQ stream (known: {', '.join(dlqs)})")
        dlqs = [dlq]
    else:
        entry_id = ref
    found: list[DlqEntry] = []
    for dlq in dlqs:
        try:
            rows = entries(client.xrange(dlq, min=entry_id, max=entry_id))
        except redis.ResponseError:
            raise DlqError(f"{entry_id!r} is not a stream id (like 1715000000000-0)") from None
        found.extend(entry_from_fields(dlq, row_id, fields) for row_id, fields in rows)
    if not found:
        raise DlqError(f"no dead letter with id {ref}")
    if len(found) > 1:
        options = ", ".join(f"{e.dlq}/{e.entry_id}" for e in found)
        raise DlqError(f"id {ref} is in several DLQ streams; pick one of {options}")
    return found[0]


def replay_fields(entry: DlqEntry) -> dict[bytes, bytes]:
    """The message to re-publish: the original fields, as the exact bytes its producer
    wrote, plus where it came from.

    Extra fields are ignored by the wire schemas (transactions only read ``data``; axioms
    ignore unknown keys), so the workers parse a replayed message like the original.
    """
    payload = entry.payload_bytes()
    if payload is None:
        raise DlqError(f"{entry.entry_id}: payload is not a JSON object, nothing to replay")
    if not payload:
        raise DlqError(f"{entry.entry_id}: payload is empty, nothing to replay")
    original_id = entry.letter.message_id if entry.letter else entry.fields.get("message_id", "")
    previous = payload.get(REPLAY_COUNT_FIELD.encode(), b"0")
    replays = int(previous) + 1 if previous.isdigit() else 1
    return {
        **payload,
        REPLAYED_FROM_FIELD.encode(): original_id.encode(),
        REPLAY_COUNT_FIELD.encode(): str(replays).encode(),
    }


def _target_stream(settings: Settings, entry: DlqEntry) -> str:
    """The source stream, checked to be a place the replay may safely write to."""
    stream = entry.source_stream
    if not stream:
        raise DlqError(f"{entry.entry_id}: no source stream recorded")
    if settings.is_cluster:
        known = {keys.stream: keys for keys in all_stream_keys(settings)}
        group = entry.letter.group if entry.letter else ""
        expected = known[stream].dlq if stream in known else None
        if expected is None:
            expected = stream_keys(settings, stream, group or "-", "results").dlq
        if expected != entry.dlq:
            raise DlqError(
                f"{entry.entry_id}: stream {stream!r} does not share a hash slot with {entry.dlq}"
            )
    return stream


def replay_one(
    client: RedisClient, settings: Settings, entry: DlqEntry, dry_run: bool = False
) -> ReplayOutcome:
    """Re-publish one dead letter; see the module docstring for the guarantees."""
    try:
        stream = _target_stream(settings, entry)
        fields = replay_fields(entry)
    except DlqError as exc:
        return ReplayOutcome(entry.entry_id, "refused", entry.source_stream, detail=str(exc))
    if dry_run:
        return ReplayOutcome(entry.entry_id, "would_replay", stream)
    args: list[str | bytes | int] = [entry.entry_id, settings.idempotency_ttl_s * 1000]
    for name, value in fields.items():
        args += [name, value]
    script = client.register_script(_REPLAY_LUA)
    reply = script(keys=[entry.dlq, stream, replayed_key(entry.dlq)], args=args)
    if isinstance(reply, list):
        return _already(entry.entry_id, stream, int(float(reply[0])))
    if reply is None:
        return ReplayOutcome(entry.entry_id, "gone", stream, detail="no longer in the DLQ")
    return ReplayOutcome(entry.entry_id, "replayed", stream, new_id=reply)


def _already(entry_id: str, stream: str | None, millis: int) -> ReplayOutcome:
    at = datetime.fromtimestamp(millis / 1000, tz=timezone.utc)
    return ReplayOutcome(entry_id, "already_replayed", stream, replayed_at=at)


def replayed_before(client: RedisClient, settings: Settings, ref: str) -> ReplayOutcome | None:
    """An id no longer in the DLQ that a replay took out of it (within
    ``SENTINEL_IDEMPOTENCY_TTL_S``), as an ``already_replayed`` outcome; None otherwise."""
    dlqs = dlq_streams_of(client, settings)
    dlq, sep, entry_id = ref.rpartition("/")
    if sep:
        dlqs = [dlq] if dlq in dlqs else []
    for name in dlqs:
        score = client.zscore(replayed_key(name), entry_id)
        if score is not None:
            return _already(entry_id, None, int(score))
    return None


def replay(
    client: RedisClient,
    settings: Settings,
    entries: Sequence[DlqEntry],
    dry_run: bool = False,
    progress: Progress | None = None,
) -> ReplaySummary:
    summary = ReplaySummary()
    for done, entry in enumerate(entries, start=1):
        summary.outcomes.append(replay_one(client, settings, entry, dry_run))
        if progress:
            progress(done)
    return summary


def purge(
    client: RedisClient,
    entries: Sequence[DlqEntry],
    progress: Progress | None = None,
    batch: int = PAGE_SIZE,
) -> int:
    """Delete the given entries (XDEL in batches); returns how many were still there."""
    by_dlq: dict[str, list[str]] = {}
    for entry in entries:
        by_dlq.setdefault(entry.dlq, []).append(entry.entry_id)
    deleted = done = 0
    for dlq, ids in by_dlq.items():
        for start in range(0, len(ids), batch):
            chunk = ids[start : start + batch]
            deleted += int(client.xdel(dlq, *chunk))
            done += len(chunk)
            if progress:
                progress(done)
    return deleted


def depth_by_stream(
    client: RedisClient, settings: Settings, cap: int = 10_000
) -> dict[str, int] | None:
    """Dead letters per source stream. On a single server all streams share one DLQ, so
    this counts by scanning; None when the DLQ holds more than ``cap`` entries (then only
    the total from :func:`depth` is cheap enough to show)."""
    totals = depth(client, settings)
    if sum(totals.values()) > cap:
        return None
    counts: dict[str, int] = {}
    for dlq in totals:
        for entry in _scan(client, dlq, None):
            name = entry.source_stream or "(unknown)"
            counts[name] = counts.get(name, 0) + 1
    return counts
