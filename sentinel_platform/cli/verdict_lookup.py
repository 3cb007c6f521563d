"""``sentinel verdict``: finding one message's result entries and its input in Redis.

The results stream is large (``SENTINEL_RESULTS_MAXLEN`` entries) and has no index by
message, so every read here is bounded and says how far it got (:class:`Search`):

* a results entry id is read directly; the message's other entries (the provisional
  verdict and its re-screen share the ``source_message_id``) follow it;
* a natural key (a transaction's id) is looked up through its idempotency marker
  (``StreamKeys.marker``), which holds the source message id the commit settled. Entry
  ids are the server's clock, so the message's results lie after its source id's time:
  the scan starts there and goes forward;
* a marker gone (its TTL, ``SENTINEL_IDEMPOTENCY_TTL_S``, has passed) leaves a scan of
  the newest results backwards for the key, as the stream's results name it
  (:data:`RESULT_KEYS`).

A forward scan stops early once the message's verdicts are settled: at least one found,
and every provisional one superseded by its re-screen. Otherwise it reads to the newest
entry or its bound (``limit``), whichever comes first. The input is the source entry, or,
once the stream's retention trimmed it, the copy its re-screen queue entry holds.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import redis

from sentinel_platform.registry import StreamSpec
from sentinel_platform.streams.backlog.provisional import (
    PROVISIONAL,
    QUEUE_RESULT_ID,
    QUEUE_SOURCE_ID,
    RESCREEN_OF,
    payload_of,
)
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform.streams.plumbing.replies import entries, text

Entry = tuple[str, dict[str, str]]
#: A results entry id (``<ms>-<seq>``).
ENTRY_ID = re.compile(r"^\d+-\d+$")
#: The field every result carries: the id of the message it decided in its source stream.
SOURCE_FIELD = "source_message_id"
#: Entries read per round trip of a scan.
PAGE = 1000
#: How far past a provisional verdict's time its re-screen queue entry is looked for.
QUEUE_SLACK_MS = 1000
#: The natural key of a result entry, per stream (its wire model's ``natural_key`` from
#: the fields the processor copies onto the result).
RESULT_KEYS: dict[str, Callable[[Mapping[str, str]], str | None]] = {
    "transactions": lambda f: f.get("txn_id"),
    "axioms": lambda f: (
        f"{f['source_id']}|{f['emitted_at']}" if "source_id" in f and "emitted_at" in f else None
    ),
}


@dataclass
class Search:
    """How a message was found, and how far the reads went."""

    found_by: str
    scanned: int = 0
    complete: bool = True
    note: str = ""


@dataclass
class Found:
    """One message's result entries (oldest first) and its input."""

    results: list[Entry]
    source_id: str | None
    search: Search
    input_fields: dict[str, str] | None = None
    kept_in: str | None = None
    #: provisional verdicts still in the re-screen queue: results entry id -> queue entry id
    queued: dict[str, str] = field(default_factory=dict)


def settled(found: Sequence[Entry]) -> bool:
    """Whether ``found`` holds a verdict and every provisional one has its re-screen."""
    if not found:
        return False
    superseded = {fields.get(RESCREEN_OF) for _, fields in found}
    return all(
        entry_id in superseded for entry_id, fields in found if fields.get(PROVISIONAL) == "true"
    )


def _ms(entry_id: str) -> int:
    return int(entry_id.split("-")[0])


def scan_forward(
    client: RedisClient, results: str, start: str, source_id: str, limit: int
) -> tuple[list[Entry], int, bool]:
    """Entries of ``results`` from ``start`` on whose ``source_message_id`` is
    ``source_id``: what was found, how many entries were read, and whether the read
    reached the newest entry (or stopped early, every verdict settled)."""
    found: list[Entry] = []
    scanned, low = 0, start
    while scanned < limit:
        count = min(PAGE, limit - scanned)
        page = entries(client.xrange(results, min=low, max="+", count=count))
        scanned += len(page)
        found += [(i, f) for i, f in page if f.get(SOURCE_FIELD) == source_id]
        if len(page) < count or settled(found):
            return found, scanned, True
        low = f"({page[-1][0]}"
    return found, scanned, False


def scan_backward(
    client: RedisClient, results: str, match: Callable[[Mapping[str, str]], bool], limit: int
) -> tuple[Entry | None, int, bool]:
    """The newest entry of ``results`` that ``match`` accepts within ``limit`` entries."""
    scanned, high = 0, "+"
    while scanned < limit:
        count = min(PAGE, limit - scanned)
        page = entries(client.xrevrange(results, max=high, min="-", count=count))
        scanned += len(page)
        for entry in page:
            if match(entry[1]):
                return entry, scanned, True
        if len(page) < count:
            return None, scanned, True
        high = f"({page[-1][0]}"
    return None, scanned, False


def _read_one(client: RedisClient, key: str, entry_id: str) -> Entry | None:
    try:
        got = entries(client.xrange(key, min=entry_id, max=entry_id))
    except redis.ResponseError:  # not a stream, or not an id the server takes
        return None
    return got[0] if got else None


def _message(
    client: RedisClient, results: str, source_id: str | None, anchor: Entry | None, limit: int
) -> tuple[list[Entry], Search]:
    """Every entry of the message ``source_id`` (``anchor``: one already in hand)."""
    if source_id is None or not ENTRY_ID.match(source_id):
        return ([anchor] if anchor else []), Search("entry_id", note="the entry names no message")
    start = source_id if anchor is None else min(source_id, anchor[0], key=_entry_order)
    found, scanned, complete = scan_forward(client, results, start, source_id, limit)
    if anchor is not None and anchor[0] not in {i for i, _ in found}:
        found = sorted([*found, anchor], key=lambda e: _entry_order(e[0]))
    where = f"{scanned:,} results from the source message's time on"
    note = where if complete else f"{where}, then stopped at the bound (--scan {limit})"
    return found, Search("", scanned, complete, note)


def _entry_order(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


def find(
    client: RedisClient, spec: StreamSpec, shards: Sequence[StreamKeys], query: str, limit: int
) -> Found | None:
    """The message ``query`` names (a results entry id, or a natural key) on the stream
    whose shards' keys are ``shards``; None when nothing was found within the bounds."""
    results_keys = list(dict.fromkeys(shard.results for shard in shards))
    if ENTRY_ID.match(query):
        for results in results_keys:
            anchor = _read_one(client, results, query)
            if anchor is not None:
                source = anchor[1].get(SOURCE_FIELD)
                found, search = _message(client, results, source, anchor, limit)
                search.found_by = "entry_id"
                return _with_input(client, shards, Found(found, source, search))
    for shard in shards:
        marker = client.get(shard.marker(query))
        if marker is not None:
            source = text(marker)
            found, search = _message(client, shard.results, source, None, limit)
            search.found_by = "marker"
            if found:
                return _with_input(client, shards, Found(found, source, search))
    return _scan_for_key(client, spec, shards, results_keys, query, limit)


def _scan_for_key(
    client: RedisClient,
    spec: StreamSpec,
    shards: Sequence[StreamKeys],
    results_keys: Sequence[str],
    query: str,
    limit: int,
) -> Found | None:
    """No marker: the newest results scanned backwards for the key (bounded)."""
    key_of = RESULT_KEYS.get(spec.name)
    if key_of is None:
        return None
    for results in results_keys:
        hit, scanned, _ = scan_backward(client, results, lambda f: key_of(f) == query, limit)
        if hit is None:
            continue
        source = hit[1].get(SOURCE_FIELD)
        found, search = _message(client, results, source, hit, limit)
        search.found_by = "scan"
        search.note = (
            f"its idempotency marker has expired (SENTINEL_IDEMPOTENCY_TTL_S): found among "
            f"the newest {scanned:,} results, then read {search.note}"
        )
        return _with_input(client, shards, Found(found, source, search))
    return None


def _with_input(client: RedisClient, shards: Sequence[StreamKeys], found: Found) -> Found:
    """``found`` with its input: the source entry, else its re-screen queue copy; and
    which of its provisional verdicts are still queued."""
    if found.source_id is not None and ENTRY_ID.match(found.source_id):
        for shard in shards:
            entry = _read_one(client, shard.stream, found.source_id)
            if entry is not None:
                found.input_fields, found.kept_in = entry[1], "stream"
                break
    provisional = [i for i, f in found.results if f.get(PROVISIONAL) == "true"]
    for shard in shards:
        for queue_id, fields in _queued(client, shard, provisional):
            found.queued[fields[QUEUE_RESULT_ID]] = queue_id
            if found.kept_in is None and fields.get(QUEUE_SOURCE_ID) == found.source_id:
                found.input_fields, found.kept_in = payload_of(fields), "rescreen_queue"
    return found


def _queued(client: RedisClient, shard: StreamKeys, result_ids: Sequence[str]) -> list[Entry]:
    """The queue entries of the provisional verdicts ``result_ids``. A queue entry is added
    in the verdict's own commit, so its id's time is the verdict's: only the span
    :data:`QUEUE_SLACK_MS` from it is read."""
    if not shard.rescreen:
        return []
    hits = []
    for result_id in result_ids:
        ms = _ms(result_id)
        try:
            span = entries(client.xrange(shard.rescreen, min=str(ms), max=str(ms + QUEUE_SLACK_MS)))
        except redis.ResponseError:
            return []
        hits += [(i, f) for i, f in span if f.get(QUEUE_RESULT_ID) == result_id]
    return hits
