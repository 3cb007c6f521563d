"""The lanes' own settings: what a second analyzer does beyond the analyzer's settings
it takes under its prefix (:mod:`sentinel_platform.settings.roles`)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class LaneSettings(BaseModel):
    """The shadow's share of traffic: a part of :class:`~sentinel_platform.settings.Settings`."""

    analyzer_shadow_fraction: float = Field(
        1.0,
        ge=0.0,
        le=1.0,
        description="the share of messages (0-1) the shadow analyzer "
        "(SENTINEL_ANALYZER_SHADOW_URL and the analyzer's other settings as "
        "SENTINEL_ANALYZER_SHADOW_*) is asked about, chosen by each message's natural key "
        "so a redelivery is chosen alike; its verdicts go to the shadow result stream and "
        "never decide (docs/analyzer.md)",
    )
