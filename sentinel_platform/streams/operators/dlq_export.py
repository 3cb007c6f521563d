"""``sentinel dlq export``: every dead letter, losslessly, as JSON Lines.

The DLQ is capped (``SENTINEL_DLQ_MAXLEN``) and a dead letter in it is the only copy of its
message, so before the cap trims anything an operator saves it: one line per entry,
oldest first, ``{"dlq": <DLQ stream>, "id": <entry id>, "fields": {<name>: <value>}}``,
every field exactly as stored (whatever its format: a worker's dead letter, a base64
``payload`` with its ``payload_encoding``, or an entry that is no dead letter at all).
An entry holding bytes that are not UTF-8 cannot be JSON text: its line carries
``"fields_encoding": "base64"`` and every name and value as base64 of its exact bytes.

``--delete-exported`` makes room: each page is written, flushed (and fsynced for a file)
before exactly the ids on it are deleted (XDEL), so an entry leaves the DLQ only once its
line is stored, and a dead letter arriving during the export stays.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TextIO

from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.replies import entries
from sentinel_platform.streams.sharding.shards import dlq_streams_of

PAGE_SIZE = 500
_STREAM_ID = re.compile(r"^\d+(-\d+)?$")


class ExportError(ValueError):
    """The export cannot start (a bad ``--since``)."""


@dataclass
class ExportSummary:
    exported: int = 0
    deleted: int = 0
    #: the last id written per DLQ stream: ``--since`` of the next export
    last_ids: dict[str, str] = field(default_factory=dict)


def _utf8(text: str) -> bool:
    """True when ``text`` is valid UTF-8 (the clients decode with ``surrogateescape``)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8", "surrogateescape")).decode("ascii")


def export_line(dlq: str, entry_id: str, fields: Mapping[str, str]) -> str:
    """One entry as a JSON line (no newline); see the module docstring for the format."""
    doc: dict[str, object] = {"dlq": dlq, "id": entry_id}
    if all(_utf8(name) and _utf8(value) for name, value in fields.items()):
        doc["fields"] = dict(fields)
    else:
        doc["fields_encoding"] = "base64"
        doc["fields"] = {_b64(name): _b64(value) for name, value in fields.items()}
    return json.dumps(doc, ensure_ascii=False)


def check_since(entry_id: str) -> str:
    """``--since``: a stream id (``1715000000000-0`` or ``1715000000000``)."""
    if not _STREAM_ID.match(entry_id.strip()):
        raise ExportError(
            f"--since {entry_id!r} is not a stream id (like 1715000000000-0): give the last "
            "id of the previous export"
        )
    return entry_id.strip()


def export(
    client: RedisClient,
    settings: Settings,
    out: TextIO,
    since: str | None = None,
    delete: bool = False,
    sync: Callable[[], None] | None = None,
) -> ExportSummary:
    """Write every DLQ entry after ``since`` (exclusive) to ``out``, oldest first per DLQ
    stream, paged; with ``delete``, XDEL each page once it is flushed and ``sync``-ed."""
    summary = ExportSummary()
    for dlq in dlq_streams_of(client, settings):
        low = "-" if since is None else f"({check_since(since)}"
        while True:
            page = entries(client.xrange(dlq, min=low, max="+", count=PAGE_SIZE))
            if not page:
                break
            out.write("".join(export_line(dlq, i, f) + "\n" for i, f in page))
            out.flush()
            if sync is not None:
                sync()
            if delete:
                summary.deleted += int(client.xdel(dlq, *[i for i, _ in page]))
            summary.exported += len(page)
            summary.last_ids[dlq] = page[-1][0]
            if len(page) < PAGE_SIZE:
                break
            low = f"({page[-1][0]}"
    return summary
