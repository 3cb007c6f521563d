"""``sentinel dlq ... --json``: a dead letter, a replay's outcome, a purge, an import."""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, Field

from sentinel_platform.cli.document import Document


class DlqEntry(Document):
    """One dead letter (``dlq list --json`` is an array of them, ``dlq show --json`` one)."""

    dlq: str = Field(description="the DLQ stream")
    id: str = Field(description="the entry id (what `show` and `replay` take)")
    dead_lettered_at: AwareDatetime = Field(
        description="when it was dead-lettered (an imported entry: its time before export)"
    )
    stream: str | None = Field(description="the source stream's Redis key")
    group: str | None = Field(description="the consumer group it died in")
    message_id: str | None = Field(description="its id in the source stream")
    reason: str | None = Field(description="why it was dead-lettered")
    error: str | None = Field(description="the error, bounded")
    deliveries: int | None = Field(description="how often it was delivered")
    consumer: str | None = Field(description="the consumer that gave up on it")
    imported_from: str | None = Field(description="`dlq import`: its id before export")
    payload: dict[str, str] | None = Field(description="the original fields; null: unreadable")
    payload_encoding: str | None = Field(description="`base64` when the payload holds raw bytes")
    payload_raw: str | None = Field(description="base64 payload of exact bytes, when stored so")
    fields: dict[str, str] = Field(description="every stored field, verbatim")
    problem: str | None = Field(description="why the entry is not a readable dead letter")


class ReplayOutcome(Document):
    """One element of ``dlq replay --json`` (an array)."""

    entry_id: str = Field(description="the DLQ entry id")
    status: Literal["replayed", "would_replay", "already_replayed", "gone", "refused"] = Field(
        description="what happened"
    )
    stream: str | None = Field(description="the stream it was (or would be) published on")
    new_id: str | None = Field(description="its id there, when replayed now")
    replayed_at: AwareDatetime | None = Field(description="when an earlier replay did it")
    detail: str | None = Field(description="why it was refused or is gone")


class Purge(Document):
    """``dlq purge --json``."""

    purged: int = Field(description="entries deleted")


class Import(Document):
    """``dlq import --json``."""

    imported: int = Field(description="entries added to the DLQ")
    skipped: int = Field(description="entries imported before or still in the DLQ")
