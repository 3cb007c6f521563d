"""One dead letter as an operator reads it back: the letter, its payload, when it happened.

A dead letter keeps the original message's fields as the exact bytes its producer wrote,
so a replay republishes what was sent, not a re-encoding. :class:`DlqEntry` gives them both
ways: exact (:meth:`DlqEntry.payload_bytes`, what a replay writes) and readable
(:meth:`DlqEntry.payload`, bytes that are not UTF-8 shown as ``\\xNN`` escapes, for a
terminal). An entry whose fields do not parse as a dead letter is still listed, with the
problem, rather than hidden. An entry restored by ``dlq import`` is dated by the id it had
at export, so ``--since`` finds it where it was dead-lettered, not when it was imported.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import datetime, timezone

from sentinel_platform.schemas import DeadLetter, SchemaError
from sentinel_platform.streams.operators.dlq_import import IMPORTED_FROM_FIELD
from sentinel_platform.streams.plumbing.undecodable import readable

_STREAM_ID = re.compile(r"^\d+-\d+$")


@dataclass(frozen=True)
class DlqEntry:
    """One DLQ stream entry; ``letter`` is None when its fields do not parse."""

    dlq: str
    entry_id: str
    fields: dict[str, str]
    letter: DeadLetter | None
    problem: str | None = None

    @property
    def source_stream(self) -> str | None:
        return self.letter.stream if self.letter else self.fields.get("stream")

    @property
    def reason(self) -> str | None:
        return self.letter.reason if self.letter else self.fields.get("reason")

    @property
    def imported_from(self) -> str | None:
        """The id the entry had when it was exported, for an entry ``dlq import`` restored."""
        origin = self.fields.get(IMPORTED_FROM_FIELD)
        return origin if origin and _STREAM_ID.match(origin) else None

    @property
    def dead_lettered_at(self) -> datetime:
        """When the message was dead-lettered: the millisecond part of its stream id, or,
        for an imported entry, of the id it had at export (its own id is the import's)."""
        return id_time(self.imported_from or self.entry_id)

    def payload(self) -> dict[str, str] | None:
        """The original message's fields as text (bytes that are not UTF-8 shown as
        ``\\xNN`` escapes), or None when the payload is not a readable JSON object."""
        exact = self.payload_bytes()
        if exact is None:
            return None
        return {readable(name): readable(value) for name, value in exact.items()}

    def payload_bytes(self) -> dict[bytes, bytes] | None:
        """The original message's fields as the exact bytes its producer wrote, or None
        when the payload is not a readable JSON object."""
        if self.letter is not None:
            try:
                return self.letter.original_bytes()
            except (ValueError, TypeError, AttributeError):  # not JSON, not an object, not b64
                return None
        raw = self.fields.get("payload")
        try:
            value = json.loads(raw) if raw is not None else None
        except ValueError:
            return None
        if not isinstance(value, dict):
            return None
        return {
            str(k).encode(): (v if isinstance(v, str) else json.dumps(v)).encode()
            for k, v in value.items()
        }


def id_time(entry_id: str) -> datetime:
    """The time in a stream id (its millisecond part), in UTC."""
    millis = int(entry_id.split("-", 1)[0])
    return datetime.fromtimestamp(millis / 1000, tz=timezone.utc)


def entry_from_fields(dlq: str, entry_id: str, fields: dict[str, str]) -> DlqEntry:
    """The entry of one DLQ row; one that does not parse keeps its fields and the problem."""
    try:
        return DlqEntry(dlq, entry_id, dict(fields), DeadLetter.from_fields(fields))
    except SchemaError as exc:
        return DlqEntry(dlq, entry_id, dict(fields), None, problem=str(exc))
