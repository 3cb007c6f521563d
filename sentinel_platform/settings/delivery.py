"""Recovery and delivery settings: how workers read, hold, retry and hand back messages,
and how many they have in hand at once.

``SENTINEL_WORKER_CONCURRENCY`` is a number or ``auto``; readers that size threads and
pools need one number either way, so ``auto`` becomes :class:`AutoConcurrency`, a number
that remembers it stands for an adaptive limit.
"""

from __future__ import annotations

from typing import Any

from pydantic import (
    BaseModel,
    Field,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_serializer,
    field_validator,
)

AUTO = "auto"
DEFAULT_MAX_CONCURRENCY = 256


class AutoConcurrency(int):
    """``SENTINEL_WORKER_CONCURRENCY=auto``: an ``int`` worth the maximum in-flight limit
    (what readers that need one number use to size threads and connection pools) that
    remembers it stands for an adaptive limit (:attr:`Settings.worker_concurrency_pinned`)."""


class DeliverySettings(BaseModel):
    """Recovery, delivery and concurrency: a part of
    :class:`~sentinel_platform.settings.Settings`."""

    reclaim_idle_ms: int = Field(
        30_000,
        ge=100,
        le=86_400_000,
        description="idle time after which a pending message of a consumer without a lease "
        "counts as abandoned",
    )
    reclaim_delivery_limit: int = Field(
        3,
        ge=1,
        le=1000,
        description="most times a message is handed to a processor before it is dead-lettered",
    )
    lease_ttl_ms: int = Field(
        5_000,
        ge=200,
        le=600_000,
        description="how long a worker's liveness lease lives without a heartbeat",
    )
    connection_liveness: bool = Field(
        True,
        description="register a dedicated connection beside the lease, so survivors recover "
        "a killed worker's messages when its socket closes (needs CLIENT LIST); false: the "
        "lease TTL alone, e.g. behind a proxy that pools connections",
    )
    hang_timeout_ms: int = Field(
        300_000,
        ge=1_000,
        le=86_400_000,
        description="a message in hand longer than this means the worker is hung: it deletes "
        "its lease and exits (status 70) so the others recover its messages",
    )
    shutdown_timeout_s: float = Field(
        10.0,
        gt=0,
        le=600,
        description="on stop, how long a worker keeps retrying commits Redis refuses before "
        "it gives them up (they stay pending for the others) and exits with status 3",
    )
    retry_backoff_ms: int = Field(
        1_000, ge=0, le=600_000, description="wait before a failed message is retried"
    )
    idempotency_ttl_s: int = Field(
        7 * 24 * 3600,
        ge=60,
        description='how long "already processed" markers are kept (default 7 days)',
    )
    lag_key_ttl_s: int = Field(
        10,
        ge=1,
        le=3600,
        description="TTL of the lag key the workers publish (missing key: no live worker)",
    )
    read_count: int = Field(100, ge=1, le=10_000, description="batch size of each read")
    worker_concurrency_max: int = Field(
        256,
        ge=1,
        le=1024,
        description="the most messages one worker may have in hand at once when "
        "SENTINEL_WORKER_CONCURRENCY is auto; also the analyzer client's connections then",
    )
    worker_concurrency: int = Field(
        AUTO,  # validated into AutoConcurrency (validate_default)
        validate_default=True,
        ge=1,
        le=1024,
        description="processor calls one worker process makes at once: auto (the default) "
        "finds the limit at run time (adaptive, up to SENTINEL_WORKER_CONCURRENCY_MAX: more "
        "for an analyzer that keeps up, fewer when it slows down or answers 429); a number "
        "pins it (readers that need one number, such as thread and connection pools, get "
        "the maximum for auto)",
    )

    @field_validator("worker_concurrency", mode="wrap")
    @classmethod
    def _concurrency_or_auto(
        cls, value: Any, handler: ValidatorFunctionWrapHandler, info: ValidationInfo
    ) -> int:
        """``auto`` becomes :class:`AutoConcurrency` (the maximum, remembering it is auto);
        anything else is validated as the pinned number."""
        if isinstance(value, AutoConcurrency) or (
            isinstance(value, str) and value.strip().lower() == AUTO
        ):
            return AutoConcurrency(info.data.get("worker_concurrency_max", DEFAULT_MAX_CONCURRENCY))
        try:
            pinned: int = handler(value)
        except ValidationError:
            raise ValueError("must be a whole number from 1 to 1024, or auto") from None
        return pinned

    @field_serializer("worker_concurrency")
    def _dump_concurrency(self, value: int) -> int | str:
        # A dump loads back to the same meaning: auto stays auto.
        return AUTO if isinstance(value, AutoConcurrency) else int(value)

    @property
    def worker_concurrency_pinned(self) -> int | None:
        """The pinned in-flight limit, or None for ``auto`` (adaptive up to
        ``worker_concurrency_max``). ``worker_concurrency`` itself is always a number:
        the pinned one, or the maximum for auto, for readers that size threads or pools."""
        if isinstance(self.worker_concurrency, AutoConcurrency):
            return None
        return self.worker_concurrency

    block_ms: int = Field(1_000, ge=0, le=60_000, description="longest a read blocks")
    simulate_latency_ms: int = Field(
        0,
        ge=0,
        le=600_000,
        description="extra processing time per message (demos, backpressure tests)",
    )
    metrics_host: str = Field(
        "127.0.0.1",
        min_length=1,
        description="bind address of a worker's --metrics-port endpoint (0.0.0.0: any host)",
    )


def check_hang_timeout(settings: DeliverySettings) -> None:
    """Refuse a hang timeout that is not above the lease's TTL, naming both settings."""
    if settings.hang_timeout_ms <= settings.lease_ttl_ms:
        raise ValueError(
            f"SENTINEL_HANG_TIMEOUT_MS ({settings.hang_timeout_ms}) must be above "
            f"SENTINEL_LEASE_TTL_MS ({settings.lease_ttl_ms})"
        )
