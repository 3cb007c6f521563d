"""Backpressure settings: the lag limits (in seconds of queued work, or Sentinel-L7's
message counts) and how producers pace and wait at them (docs/backpressure.md)."""

from __future__ import annotations

from pydantic import BaseModel, Field


class BackpressureSettings(BaseModel):
    """The lag limits and the producer's pacing: a part of
    :class:`~sentinel_platform.settings.Settings`."""

    lag_warn_s: float = Field(
        2.0,
        gt=0,
        le=3600,
        description="soft backpressure limit in seconds of queued work (lag / the fleet's "
        "measured drain rate, beyond what the workers hold in flight); zone elevated "
        "(docs/backpressure.md)",
    )
    lag_pause_s: float = Field(
        10.0,
        gt=0,
        le=86_400,
        description="hard backpressure limit in seconds of queued work: producers wait, "
        "the lag sensor pauses publishing; zone backpressure",
    )
    lag_warn: int | None = Field(
        None,
        ge=1,
        description="Sentinel-L7's soft limit in messages; set, the count limits replace "
        "the time limits (unset SENTINEL_LAG_PAUSE is then 4x it)",
    )
    lag_pause: int | None = Field(
        None,
        ge=2,
        description="Sentinel-L7's hard limit in messages; set, the count limits replace "
        "the time limits (unset SENTINEL_LAG_WARN is then a quarter of it); must be above "
        "SENTINEL_READ_COUNT x SENTINEL_WORKER_CONCURRENCY x workers",
    )
    lag_warn_sleep_ms: int = Field(
        500,
        ge=0,
        le=60_000,
        description="longest pause between two paced batches (the producer re-reads the lag "
        "at least this often)",
    )
    lag_pause_poll_ms: int = Field(
        100, ge=10, le=60_000, description="producer poll interval at the hard limit"
    )
    max_pause_s: float = Field(
        600,
        gt=0,
        le=86_400,
        description="longest a producer waits at the hard limit (or while consumers read "
        "nothing) before failing the run",
    )
    publish_batch_size: int = Field(
        500,
        ge=1,
        le=100_000,
        description="messages per publish pipeline (the lag is checked between batches)",
    )


def check_lag_limits(settings: BackpressureSettings) -> None:
    """Refuse a soft limit at or above the hard one, in messages or in seconds: the
    elevated zone would never come before the pause."""
    warn, pause = settings.lag_warn, settings.lag_pause
    if warn is not None and pause is not None and warn >= pause:
        raise ValueError(f"SENTINEL_LAG_WARN ({warn}) must be below SENTINEL_LAG_PAUSE ({pause})")
    if settings.lag_warn_s >= settings.lag_pause_s:
        raise ValueError(
            f"SENTINEL_LAG_WARN_S ({settings.lag_warn_s}) must be below "
            f"SENTINEL_LAG_PAUSE_S ({settings.lag_pause_s})"
        )
