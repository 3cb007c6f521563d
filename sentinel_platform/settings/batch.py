"""The batch lane's settings: which partitions go through a provider's batch API and what
its tokens cost. A part of :class:`~sentinel_platform.settings.Settings`.

OpenAI's Batch API and Anthropic's Message Batches take past data at half the real-time
price and apart from the per-minute limits; fresh data needs its verdict in seconds and
stays real time. The platform's own ``sentinel`` contract has no batch lane.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, Field

#: The APIs with a batch lane, and the share of the real-time price their providers
#: document for batch tokens (both: half).
BATCH_PRICE_SHARE: dict[str, float] = {"openai": 0.5, "anthropic": 0.5}
Lane = Literal["realtime", "batch"]
LANES: tuple[Lane, ...] = ("realtime", "batch")


class BatchSettings(BaseModel):
    """When a partition goes to the batch lane, and the batch lane's price."""

    analyzer_batch_after_s: float = Field(
        86_400.0,
        ge=0,
        description="a partition whose data day ended longer ago than this (seconds) is "
        "published to its stream's batch lane when the analyzer's API has one (openai, "
        "anthropic); a run's sentinel/lane tag (realtime or batch) wins both ways; the "
        "sentinel API stays real time (docs/analyzer.md)",
    )
    analyzer_batch_price_share: float | None = Field(
        None,
        gt=0,
        le=1,
        description="the batch lane's token price as a share of the real-time prices "
        "(SENTINEL_ANALYZER_PRICE_*); unset: the provider's documented discount (0.5 for "
        "openai and anthropic)",
    )

    analyzer_batch_poll_s: float = Field(
        60.0,
        gt=0,
        description="how long the worker's batch lane waits before it first polls a batch "
        "at the provider; the wait doubles at each poll that finds it still running, up "
        "to SENTINEL_ANALYZER_BATCH_POLL_MAX_S",
    )
    analyzer_batch_poll_max_s: float = Field(
        600.0,
        gt=0,
        description="the longest wait between two polls of one batch at the provider (seconds)",
    )
    analyzer_batch_gather_s: float = Field(
        5.0,
        gt=0,
        description="how long the batch lane keeps gathering once its stream's batch lane "
        "has nothing more to read: entries gathered are submitted when none came for this "
        "long, once the oldest has waited 12 times this long, or at once when a batch is "
        "full",
    )

    def batch_price_share(self, api: str) -> float:
        """The share of the real-time price a batch token of ``api`` costs."""
        if self.analyzer_batch_price_share is not None:
            return self.analyzer_batch_price_share
        return BATCH_PRICE_SHARE.get(api, 1.0)
