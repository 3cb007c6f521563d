"""``sentinel dlq import``: put the lines of ``sentinel dlq export`` back into the DLQ.

The export makes room in a capped DLQ (``--delete-exported``); the import is its way back,
so an exported dead letter can be listed, shown and replayed again. Each line becomes a
new entry of the DLQ stream it names, with every field as exported (base64 lines decoded
to their exact bytes) plus ``_imported_from`` = the id it had when it was exported (kept
from an earlier import, so it stays the id the worker gave it). That id carries the time
of dead-lettering: ``sentinel dlq list`` shows it, and the DLQ sensor does not count an
imported entry as a new dead letter.

The whole file is checked before anything is written: a line that is not JSON, not in the
export's format, or names a stream that is no DLQ of this deployment fails the import
naming its line number, and the DLQ is left as it was. Importing is idempotent per
exported entry: a script adds the entry and records its old id in a set next to the DLQ
(``<dlq>:imported``, the DLQ's hash slot on a cluster) in one step, and skips an entry that
was imported before or is still in the DLQ under its old id (exported without deleting).
Entries are added without trimming: an import never pushes older dead letters out; the
DLQ fill alert says when it is near its cap.
"""

from __future__ import annotations

import base64
import binascii
import functools
import json
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.scripts import LuaScript, with_scripts

IMPORTED_FROM_FIELD = "_imported_from"
#: Entries sent per round trip (one pipeline of script calls).
PAGE_SIZE = 500
_ENTRY_ID = re.compile(r"^\d+-\d+$")

# KEYS: the DLQ stream, its set of imported ids. ARGV: the exported id, then the fields as
# name/value pairs. Returns the new entry id, or false when the entry is there already.
IMPORT_ENTRY = LuaScript(
    "import_entry",
    """
if redis.call('SISMEMBER', KEYS[2], ARGV[1]) == 1 then return false end
if #redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[1]) > 0 then return false end
local fields = {}
for i = 2, #ARGV do fields[#fields + 1] = ARGV[i] end
local new_id = redis.call('XADD', KEYS[1], '*', unpack(fields))
redis.call('SADD', KEYS[2], ARGV[1])
return new_id
""",
)


class ImportFileError(ValueError):
    """The file cannot be imported as a whole; the message names the line."""


@dataclass(frozen=True)
class ImportEntry:
    """One exported entry: where it goes, its id then, its fields as exact bytes."""

    dlq: str
    entry_id: str
    fields: dict[bytes, bytes]


@dataclass
class ImportSummary:
    imported: int = 0
    skipped: int = 0
    #: entries added per DLQ stream
    per_dlq: dict[str, int] = field(default_factory=dict)


def imported_key(dlq: str) -> str:
    """The set of exported ids already imported into ``dlq`` (shares its hash tag)."""
    return f"{dlq}:imported"


def _decode(text: object, lineno: int) -> bytes:
    if not isinstance(text, str):
        raise ImportFileError(f"line {lineno}: a field name or value is not a string")
    try:
        return base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        raise ImportFileError(f"line {lineno}: {text[:40]!r} is not base64") from None


def parse_line(line: str, lineno: int, dlqs: Sequence[str]) -> ImportEntry:
    """One line of an export, checked: see the module docstring."""
    try:
        doc = json.loads(line)
    except json.JSONDecodeError as exc:
        raise ImportFileError(f"line {lineno}: not JSON ({exc.msg})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("fields"), dict):
        raise ImportFileError(f"line {lineno}: not an export line ({{dlq, id, fields}})")
    dlq, entry_id, fields = doc.get("dlq"), doc.get("id"), doc["fields"]
    if dlq not in dlqs:
        raise ImportFileError(
            f"line {lineno}: {dlq!r} is not a DLQ stream of this deployment ({', '.join(dlqs)})"
        )
    if not isinstance(entry_id, str) or not _ENTRY_ID.match(entry_id):
        raise ImportFileError(f"line {lineno}: {entry_id!r} is not a stream entry id")
    if not fields:
        raise ImportFileError(f"line {lineno}: the entry has no fields")
    encoding = doc.get("fields_encoding")
    if encoding == "base64":
        exact = {_decode(k, lineno): _decode(v, lineno) for k, v in fields.items()}
    elif encoding is None:
        if not all(isinstance(v, str) for v in fields.values()):
            raise ImportFileError(f"line {lineno}: a field value is not a string")
        exact = {k.encode(): v.encode() for k, v in fields.items()}
    else:
        raise ImportFileError(f"line {lineno}: unknown fields_encoding {encoding!r}")
    # An entry exported again after an import keeps the id of its first export: the one
    # that tells when it was dead-lettered.
    exact.setdefault(IMPORTED_FROM_FIELD.encode(), entry_id.encode())
    return ImportEntry(str(dlq), entry_id, exact)


def read_export(lines: Iterable[str], dlqs: Sequence[str]) -> list[ImportEntry]:
    """Every entry of an export file (blank lines ignored); the first bad line raises."""
    return [
        parse_line(line, lineno, dlqs) for lineno, line in enumerate(lines, start=1) if line.strip()
    ]


def import_entries(
    client: RedisClient,
    entries: Sequence[ImportEntry],
    progress: Callable[[int], None] | None = None,
) -> ImportSummary:
    """Add each entry to its DLQ unless it is there already: one script call per entry,
    a page of calls per round trip (the script is safe to run twice)."""
    summary = ImportSummary()
    for start in range(0, len(entries), PAGE_SIZE):
        page = entries[start : start + PAGE_SIZE]
        replies = with_scripts(client, [IMPORT_ENTRY], functools.partial(_send, client, page))
        for entry, new_id in zip(page, replies, strict=True):
            if new_id is None:
                summary.skipped += 1
            else:
                summary.imported += 1
                summary.per_dlq[entry.dlq] = summary.per_dlq.get(entry.dlq, 0) + 1
        if progress:
            progress(start + len(page))
    return summary


def _send(client: RedisClient, page: Sequence[ImportEntry]) -> list[object]:
    pipe = client.pipeline(transaction=False)
    for entry in page:
        args: list[str | bytes] = [entry.entry_id]
        for name, value in entry.fields.items():
            args += [name, value]
        IMPORT_ENTRY.queue(pipe, [entry.dlq, imported_key(entry.dlq)], args)
    return list(pipe.execute())
