"""``sentinel verdict --json``: one message's verdicts, the input they judged, and who made
them (listed in :data:`~sentinel_platform.cli.output.DOCUMENTS`, whose tables document it)."""

from __future__ import annotations

from typing import Literal

from pydantic import AwareDatetime, Field

from sentinel_platform.cli.document import Document


class VerdictInput(Document):
    source_message_id: str | None = Field(description="the message's id in its source stream")
    kept_in: Literal["stream", "rescreen_queue"] | None = Field(
        description="where the input was read: the source stream, or the re-screen queue "
        "(the source entry trimmed); null: no longer kept"
    )
    fields: dict[str, str] | None = Field(description="the message's fields as published")
    note: str = Field(description="where it was found, or why it is not shown")


class VerdictRecord(Document):
    entry_id: str = Field(description="the results entry id (what `sentinel verdict` takes)")
    committed_at: AwareDatetime = Field(description="when it was committed (the entry id's time)")
    day: str | None = Field(description="the data's day (YYYY-MM-DD, UTC), the partition")
    is_threat: bool | None = Field(description="the decision; null: the stream has none")
    risk_level: str | None = Field(description="`low`, `medium` or `high`")
    driver_used: str = Field(
        description="`analyzer` (the model), `rules`, or `fallback` (the rules, because "
        "the analyzer could not decide)"
    )
    model: str | None = Field(description="the model that answered")
    prompt_version: str | None = Field(description="the prompt's version")
    fallback_cause: str | None = Field(
        description="a fallback's cause: `down`, `breaker_open`, `held`, `exhausted`, "
        "`over_budget` (provisional), `refused`, `unusable`, and the batch lane's "
        "`batch_errored`, `batch_expired`, `batch_canceled`, `batch_unanswered`, "
        "`batch_failed`, `batch_refused` (final)"
    )
    lane: str = Field(
        description="the lane it was decided in: `realtime`, or `batch` (the provider's "
        "batch API, priced at its share)"
    )
    provisional: bool = Field(description="a fallback that waits for the model")
    rescreen_of: str | None = Field(description="a re-screen: the verdict it supersedes")
    superseded_by: str | None = Field(description="the re-screen verdict that supersedes it")
    queued_for_rescreen: str | None = Field(
        description="its entry in the re-screen queue, while it is there"
    )
    narrative: str | None = Field(description="the model's reasoning")
    input_tokens: int | None = Field(description="prompt tokens billed")
    output_tokens: int | None = Field(description="completion tokens billed")
    cached_input_tokens: int | None = Field(description="prompt tokens served from cache")
    cost: float | None = Field(
        description="at the `SENTINEL_ANALYZER_PRICE_*_PER_MTOK` prices (a batch verdict's "
        "at `SENTINEL_ANALYZER_BATCH_PRICE_SHARE` of them); null: no prices "
        "or no tokens"
    )
    demo: bool = Field(description="the demo's traffic")
    fields: dict[str, str] = Field(description="every field of the entry, verbatim")


class VerdictSearch(Document):
    found_by: Literal["entry_id", "marker", "scan"] = Field(
        description="how the message was found: the results entry id, the idempotency "
        "marker of its key (its source message id), or a scan of the newest results"
    )
    entries_scanned: int = Field(description="results entries read")
    complete: bool = Field(
        description="false: the scan stopped at its bound (`--scan`) before the newest "
        "result, so a later verdict may exist"
    )
    note: str = Field(description="what was searched, in words")


class VerdictLookup(Document):
    """``sentinel verdict ID --json``."""

    stream: str = Field(description="the stream's name")
    query: str = Field(description="the id asked for")
    key: str | None = Field(description="the message's natural key (a transaction's id)")
    input: VerdictInput = Field(description="the message the verdicts judged")
    verdicts: list[VerdictRecord] = Field(description="its verdicts, oldest first")
    in_force: str = Field(
        description="the entry id of the verdict in force: the newest model verdict, else "
        "the newest"
    )
    rescreened: bool = Field(description="a provisional verdict was re-screened by the model")
    search: VerdictSearch = Field(description="how it was found")
