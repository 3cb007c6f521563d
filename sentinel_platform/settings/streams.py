"""The streams' settings: their names, consumer groups and caps (wire-compatible with
Sentinel-L7), and the modules that declare more streams."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field, field_validator
from pydantic_settings import NoDecode


class StreamSettings(BaseModel):
    """Streams, groups and result streams: a part of
    :class:`~sentinel_platform.settings.Settings`."""

    stream_modules: Annotated[list[str], NoDecode] = Field(
        default_factory=list,
        description="modules imported at start-up that declare more streams (each calls "
        "sentinel_platform.registry.register); comma-separated",
    )
    transactions_stream: str = Field(
        "transactions", min_length=1, description="transactions stream"
    )
    transactions_group: str = Field(
        "sentinel-consumers", min_length=1, description="consumer group of the transactions stream"
    )
    axioms_stream: str = Field("synapse:axioms", min_length=1, description="axioms stream")
    axioms_group: str = Field(
        "axiom-workers", min_length=1, description="consumer group of the axioms stream"
    )
    dlq_stream: str = Field(
        "sentinel:dlq",
        min_length=1,
        description="dead-letter stream (on a cluster: {<stream>}:dlq per stream)",
    )
    dlq_maxlen: int = Field(
        100_000,
        ge=100,
        description="approximate cap of the DLQ stream: past it the oldest dead letters are "
        "trimmed; alerts at 80% and 95% (docs/dead-letters.md)",
    )
    verdicts_stream: str = Field(
        "sentinel:verdicts", min_length=1, description="result stream: one verdict per transaction"
    )
    compliance_stream: str = Field(
        "sentinel:compliance_events",
        min_length=1,
        description="result stream: one compliance event per axiom",
    )
    results_maxlen: int = Field(
        1_000_000, ge=100, description="approximate cap of the result streams"
    )
    recent_transactions_key: str = Field(
        "sentinel:recent_transactions",
        min_length=1,
        description="capped list of recent verdicts (Sentinel-L7 dashboards)",
    )
    recent_transactions_size: int = Field(
        50, ge=1, le=10_000, description="length of the recent verdicts list"
    )
    alerts_stream: str = Field(
        "sentinel:alerts", min_length=1, description="alert stream read by `sentinel status`"
    )
    alerts_maxlen: int = Field(10_000, ge=10, description="approximate cap of the alert stream")

    @field_validator("stream_modules", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [name.strip() for name in value.split(",") if name.strip()]
        return value
