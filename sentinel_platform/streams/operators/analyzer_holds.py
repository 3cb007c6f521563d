"""The analyzer's fleet-wide holds as stored in Redis: their keys, what a hold says, who
finds them and how an operator ends one.

A hold (set by any worker whose analyzer asked for quiet) stops every call of every
worker to one analyzer. Workers, ``sentinel status``, ``sentinel exporter`` and
``sentinel analyzer release`` all read and write it through this module, so the one
format is written once:

* **The hold key**, ``sentinel:analyzer:<id>:hold``: a string holding a JSON record
  (:func:`encode_hold`: ``cause``, ``reason``, the analyzer's id and redacted URL, when
  it was set and for how long), with a TTL of the hold's length, or none for a hold that
  lasts until an operator releases it. Seconds left come from ``PTTL`` (the server's
  clock), never from the record. A value from before the record (plain reason text) is
  read as a ``retry_after`` hold.
* **The registry**, the hash ``sentinel:analyzers`` (analyzer id -> redacted URL):
  every worker with an analyzer adds its own at start-up, so an operator's command finds
  every analyzer's hold with one ``HGETALL`` and one read per analyzer, instead of
  SCANning every node of a cluster for ``*:hold``.
* **A key's hold**, ``sentinel:analyzer:<id>:key:<digest>:hold``: the same record with
  the refused key's fingerprint (``key``: ``sk-...abcd``), set when the analyzer rejected
  that key. It holds only the workers calling with that key, so the rest of the fleet
  keeps calling through a rotation. ``<digest>`` is a short SHA-256 of the key, never the
  key. Its registry is the hash ``sentinel:analyzer:<id>:keys`` (digest -> fingerprint),
  written with the hold, so operators find it the same way.

Every command touches one key (a read is one script over the hold key), so all of it
runs on a Redis Cluster. Nothing stored here carries a secret: ids are an explicit name
or a hash of the URL without its user-info or query, URLs are redacted before they are
written, and reasons are written by callers that keep credentials out of them.
"""

from __future__ import annotations

import hashlib
import json
import math
import time
from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from sentinel_platform.redaction import redact_url
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.replies import optional_text, text_dict
from sentinel_platform.streams.plumbing.scripts import LuaScript

KEY_PREFIX = "sentinel:analyzer:"
#: analyzer id -> redacted URL, one field per analyzer a worker has used
REGISTRY_KEY = "sentinel:analyzers"
#: The cause of a hold set for an analyzer's ``Retry-After``.
RETRY_AFTER = "retry_after"
#: The cause of a hold set because an announced rate limit (``x-ratelimit-*``,
#: ``anthropic-ratelimit-*``) has no room for the next call for a while.
ANNOUNCED_LIMIT = "announced_limit"
DEFAULT_PORTS = {"http": 80, "https": 443}

#: KEYS[1] the hold. One round trip: its milliseconds left (PTTL: -2 none, -1 no end) and
#: its record.
READ_SCRIPT = LuaScript(
    "analyzer_hold_read",
    "return {redis.call('PTTL', KEYS[1]), redis.call('GET', KEYS[1])}",
)


def analyzer_key_id(url: str, explicit: str | None = None) -> str:
    """The name a fleet's workers share for one analyzer: ``explicit``
    (``SENTINEL_ANALYZER_ID``) if given, else the first 16 hex digits of a SHA-256 of
    ``scheme://host:port/path``. User-info, query and fragment are left out (they may
    carry credentials), the host is lower-cased and a default port is written out, so
    every spelling of one endpoint gives one id and no id reveals a secret."""
    if explicit:
        return explicit
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    port = parts.port or DEFAULT_PORTS.get(scheme, 0)
    identity = f"{scheme}://{(parts.hostname or '').lower()}:{port}{parts.path or '/'}"
    return hashlib.sha256(identity.encode()).hexdigest()[:16]


def hold_key(analyzer_id: str) -> str:
    return f"{KEY_PREFIX}{analyzer_id}:hold"


def rate_key(analyzer_id: str) -> str:
    return f"{KEY_PREFIX}{analyzer_id}:rate"


def key_hold_key(analyzer_id: str, digest: str) -> str:
    """The hold of one key (by its digest) on one analyzer."""
    return f"{KEY_PREFIX}{analyzer_id}:key:{digest}:hold"


def keys_key(analyzer_id: str) -> str:
    """The registry of the keys held on one analyzer: digest -> fingerprint."""
    return f"{KEY_PREFIX}{analyzer_id}:keys"


@dataclass(frozen=True)
class Hold:
    """One analyzer's hold as an operator sees it."""

    analyzer_id: str
    #: the analyzer's URL, redacted ("" when no worker recorded it)
    analyzer: str
    #: a short word: ``retry_after`` (the analyzer asked for quiet), ``announced_limit``,
    #: ``exhausted``, ...
    cause: str
    reason: str
    #: seconds until it ends by itself; None: only a release ends it
    seconds_left: float | None
    #: when it was set (Unix seconds), None when unknown
    set_at: float | None
    #: the refused key's fingerprint (``sk-...abcd``) for a key's hold; "": the analyzer's
    key: str = ""
    #: the refused key's digest (its hold's name in Redis); "": the analyzer's hold
    key_digest: str = ""

    @property
    def ident(self) -> str:
        """Names this hold among all: the analyzer's id, with the key's digest for a key's."""
        return f"{self.analyzer_id}:key:{self.key_digest}" if self.key_digest else self.analyzer_id


def encode_hold(
    analyzer_id: str,
    analyzer: str,
    cause: str,
    reason: str,
    seconds: float | None,
    key: str = "",
) -> str:
    """The stored record of a hold (the URL is redacted here again, whatever the caller
    passed); ``key`` the refused key's fingerprint, for a key's hold."""
    record: dict[str, Any] = {
        "cause": cause,
        "reason": reason,
        "analyzer_id": analyzer_id,
        "analyzer": redact_url(analyzer) if analyzer else "",
        "set_at": round(time.time(), 3),
        "held_s": seconds,
    }
    if key:
        record["key"] = key
    return json.dumps(record, separators=(",", ":"))


def decode_hold(
    analyzer_id: str, raw: str | None, left_ms: int, key_digest: str = ""
) -> Hold | None:
    """The hold from its ``PTTL`` and stored value; None when there is none (``-2``).
    A value that is not a record (an older worker's plain reason) is its reason.
    ``key_digest`` names the key of a key's hold."""
    if left_ms == -2 or raw is None:
        return None
    try:
        record: Any = json.loads(raw)
    except ValueError:
        record = None
    if not isinstance(record, dict):
        record = {"reason": raw}
    set_at = record.get("set_at")
    return Hold(
        analyzer_id=analyzer_id,
        analyzer=str(record.get("analyzer") or ""),
        cause=str(record.get("cause") or RETRY_AFTER),
        reason=str(record.get("reason") or ""),
        seconds_left=None if left_ms == -1 else max(0.0, left_ms / 1000),
        set_at=float(set_at) if isinstance(set_at, (int, float)) else None,
        key=str(record.get("key") or "") if key_digest else "",
        key_digest=key_digest,
    )


def read_hold(client: RedisClient, analyzer_id: str) -> Hold | None:
    """The analyzer's hold now, or None. Raises ``redis.RedisError``."""
    left, raw = READ_SCRIPT.run(client, [hold_key(analyzer_id)], [])
    return decode_hold(analyzer_id, optional_text(raw), int(left))


def read_key_hold(client: RedisClient, analyzer_id: str, digest: str) -> Hold | None:
    """The hold of the key ``digest`` on the analyzer now, or None. Raises
    ``redis.RedisError``."""
    left, raw = READ_SCRIPT.run(client, [key_hold_key(analyzer_id, digest)], [])
    return decode_hold(analyzer_id, optional_text(raw), int(left), digest)


def register_key(client: RedisClient, analyzer_id: str, digest: str, fingerprint: str) -> None:
    """Record a key held on the analyzer (digest -> fingerprint), so operators find it."""
    client.hset(keys_key(analyzer_id), digest, fingerprint)


def held_keys(client: RedisClient, analyzer_id: str) -> dict[str, str]:
    """The keys recorded as held on the analyzer: digest -> fingerprint."""
    return text_dict(client.hgetall(keys_key(analyzer_id)))


def holds_of(client: RedisClient, analyzer_id: str) -> list[Hold]:
    """The analyzer's own hold, if any, then its keys' holds, by digest."""
    found = [read_hold(client, analyzer_id)]
    for digest, fingerprint in sorted(held_keys(client, analyzer_id).items()):
        hold = read_key_hold(client, analyzer_id, digest)
        found.append(hold if hold is None or hold.key else replace(hold, key=fingerprint))
    return [hold for hold in found if hold is not None]


def register(client: RedisClient, analyzer_id: str, analyzer: str) -> None:
    """Record that a worker uses this analyzer, so operators find its holds."""
    client.hset(REGISTRY_KEY, analyzer_id, redact_url(analyzer) if analyzer else "")


def registered(client: RedisClient) -> dict[str, str]:
    """Every analyzer a worker has registered: id -> redacted URL."""
    return text_dict(client.hgetall(REGISTRY_KEY))


def configured_ids(settings: Settings) -> list[str]:
    """The analyzer these settings name (``SENTINEL_ANALYZER_URL`` / ``_ID``), as a list:
    an operator's command finds its hold even before any worker registered it."""
    if settings.analyzer_url is None:
        return []
    return [analyzer_key_id(settings.analyzer_url.get_secret_value(), settings.analyzer_id)]


def read_holds(client: RedisClient, also: Iterable[str] = ()) -> list[Hold]:
    """The holds of every registered analyzer and of ``also`` (the ids an operator's
    settings name), by id. A hold whose record has no URL gets the registry's."""
    known = registered(client)
    holds = []
    for analyzer_id in sorted(set(known) | set(also)):
        for hold in holds_of(client, analyzer_id):
            if not hold.analyzer and known.get(analyzer_id):
                hold = replace(hold, analyzer=known[analyzer_id])
            holds.append(hold)
    return holds


def release(client: RedisClient, analyzer_ids: Iterable[str]) -> list[str]:
    """End every hold of these analyzers (their own and their keys') for the whole
    fleet; the ids that had one. A worker sees the release at its next read of the hold
    (within its refresh)."""
    ended = release_holds(client, [h for i in analyzer_ids for h in holds_of(client, i)])
    return list(dict.fromkeys(hold.analyzer_id for hold in ended))


def release_holds(client: RedisClient, found: Iterable[Hold]) -> list[Hold]:
    """End these holds (a key's also leaves its analyzer's registry of held keys); the
    ones that were still there. One command per key, so it runs on a Redis Cluster."""
    ended = []
    for hold in found:
        if not hold.key_digest:
            if client.delete(hold_key(hold.analyzer_id)):
                ended.append(hold)
            continue
        if client.delete(key_hold_key(hold.analyzer_id, hold.key_digest)):
            ended.append(hold)
        client.hdel(keys_key(hold.analyzer_id), hold.key_digest)
    return ended


def matches_key(hold: Hold, key: str) -> bool:
    """Whether an operator's ``--key`` (a fingerprint as status shows it, or a digest)
    names this key's hold."""
    return bool(hold.key_digest) and key in (hold.key, hold.key_digest)


def hold_text(hold: Hold) -> str:
    """``gpt-eu (https://api.example.com/v1): retry_after, 3594 s left: HTTP 429 ...``;
    a key's hold names the key: ``gpt-eu (...) key sk-...abcd: exhausted, ...``."""
    left = (
        "until released"
        if hold.seconds_left is None
        else f"{math.ceil(hold.seconds_left):d} s left"
    )
    where = f" ({hold.analyzer})" if hold.analyzer else ""
    reason = f": {hold.reason}" if hold.reason else ""
    key = f" key {hold.key or hold.key_digest}" if hold.key_digest else ""
    return f"{hold.analyzer_id}{where}{key}: {hold.cause}, {left}{reason}"
