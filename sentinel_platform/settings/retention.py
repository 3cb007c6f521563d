"""Stream retention settings: how long acknowledged entries stay in the source streams
(the trimming itself: ``streams/backlog/retention.py``).

The window must fit within the idempotency markers' TTL, a setting of
:class:`~sentinel_platform.settings.delivery.DeliverySettings`: the check and the default
window take that TTL as an argument, and the composed model passes it.
"""

from __future__ import annotations

from pydantic import BaseModel, Field

#: The window when ``SENTINEL_STREAM_RETENTION_S`` is unset, before fitting it within the
#: markers: one day.
DEFAULT_WINDOW_S = 86_400


class RetentionSettings(BaseModel):
    """Stream retention: a part of :class:`~sentinel_platform.settings.Settings`."""

    stream_retention_enabled: bool = Field(
        True,
        description="workers trim entries every group has delivered and acknowledged; false: "
        "entries are kept forever, and one older than SENTINEL_IDEMPOTENCY_TTL_S is "
        "dead-lettered expired_marker, not applied",
    )
    stream_retention_s: int | None = Field(
        None,
        ge=0,
        description="acknowledged entries are kept this long; unset: one day, shortened to "
        "fit within the markers (at most SENTINEL_IDEMPOTENCY_TTL_S - "
        "SENTINEL_STREAM_RETENTION_INTERVAL_S)",
    )
    stream_retention_interval_s: int = Field(
        60, ge=1, le=3600, description="each worker trims the source streams at most this often"
    )


def check_retention_within_markers(retention: RetentionSettings, idempotency_ttl_s: int) -> None:
    """Every entry still in a stream must be covered by its idempotency marker."""
    if not retention.stream_retention_enabled:
        return
    limit = idempotency_ttl_s - retention.stream_retention_interval_s
    if limit < 0:
        raise ValueError(
            f"SENTINEL_STREAM_RETENTION_INTERVAL_S ({retention.stream_retention_interval_s}) "
            f"must be at most SENTINEL_IDEMPOTENCY_TTL_S ({idempotency_ttl_s})"
        )
    window = retention.stream_retention_s
    if window is not None and window > limit:
        raise ValueError(
            f"SENTINEL_STREAM_RETENTION_S ({window}) must be at most "
            f"SENTINEL_IDEMPOTENCY_TTL_S - SENTINEL_STREAM_RETENTION_INTERVAL_S "
            f"({limit}): an entry kept longer than its idempotency marker could be "
            "applied twice"
        )


def retention_window_s(retention: RetentionSettings, idempotency_ttl_s: int) -> int:
    """How long acknowledged entries stay: the setting, else one day within the markers."""
    if retention.stream_retention_s is not None:
        return retention.stream_retention_s
    limit = idempotency_ttl_s - retention.stream_retention_interval_s
    return max(0, min(DEFAULT_WINDOW_S, limit))
