"""The batch lane's settings: which partitions go through a provider's batch API and what
its tokens cost. A part of :class:`~sentinel_platform.settings.Settings`.

OpenAI's Batch API and Anthropic's Message Batches take past data at half the real-time
price and apart from the per-minute limits; fresh data needs its verdict in seconds and
stays real time. The platform's own ``sentinel`` contract has no batch lane, and neither
has an OpenAI-compatible server (llama.cpp, vLLM, a proxy) unless it says so: the batch
endpoints are the provider's, not the chat API's, so :func:`serves_batches` takes the
provider's own host for one and anything else only when
``SENTINEL_ANALYZER_BATCH_LANE=on`` says it serves them.
"""

from __future__ import annotations

from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, Field

#: The APIs with a batch lane, and the share of the real-time price their providers
#: document for batch tokens (both: half).
BATCH_PRICE_SHARE: dict[str, float] = {"openai": 0.5, "anthropic": 0.5}
Lane = Literal["realtime", "batch"]
LANES: tuple[Lane, ...] = ("realtime", "batch")
#: The hosts that serve each API's batch endpoints as the provider documents them.
BATCH_HOSTS: dict[str, str] = {"openai": "api.openai.com", "anthropic": "api.anthropic.com"}
BatchLaneSetting = Literal["auto", "on", "off"]


def serves_batches(api: str, url: str | None, pinned: BatchLaneSetting = "auto") -> bool:
    """Whether the analyzer speaking ``api`` at ``url`` has a batch lane: never without a
    URL or for an API with none (``sentinel``); ``on``/``off`` pin it; ``auto`` only on
    the provider's own host (:data:`BATCH_HOSTS`), since a compatible server answers the
    chat API, not necessarily the batch one."""
    if url is None or api not in BATCH_PRICE_SHARE or pinned == "off":
        return False
    return pinned == "on" or (urlsplit(url).hostname or "").lower() == BATCH_HOSTS[api]


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

    analyzer_batch_lane: BatchLaneSetting = Field(
        "auto",
        description="whether the analyzer's server takes the provider's batch API "
        "(openai: /v1/files and /v1/batches; anthropic: /v1/messages/batches); auto: only "
        "on the provider's own host (api.openai.com, api.anthropic.com), so an "
        "OpenAI-compatible server such as llama.cpp stays real time; on: this server "
        "serves them too; off: never the batch lane",
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
