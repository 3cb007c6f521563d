"""``sentinel status --json``: a stream's batch lane (``streams[].batch``), apart from its lag."""

from __future__ import annotations

from pydantic import Field

from sentinel_platform.cli.document import Document


class BatchLane(Document):
    waiting: int = Field(
        description="messages of the batch lane waiting for a batch (not acknowledged, "
        "not in a batch at the provider)"
    )
    at_provider: int = Field(
        description="messages in batches recorded, submitted or ended (never lag)"
    )
    batches: int = Field(description="batches in the batch ledger")
    oldest_age_s: float | None = Field(description="the oldest batch's age; null: no batch")
    oldest_state: str | None = Field(
        description="its ledger state (`recorded`, `submitted`, `ended`, `refused`)"
    )
    provider_status: str | None = Field(
        description="the provider's own status of it at the last poll; null: not polled yet"
    )
