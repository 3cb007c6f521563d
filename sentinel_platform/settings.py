"""One settings model for the whole platform.

Every process (Dagster code location, workers, CLI, Spark executors) reads the same
environment variables through :class:`Settings`, so a value means the same thing
everywhere. Validation happens at start-up: a bad value fails the process immediately
with the variable's name and the allowed range, instead of surfacing hours later as
odd behaviour.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from urllib.parse import urlsplit, urlunsplit

from pydantic import (
    AliasChoices,
    Field,
    SecretStr,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, SettingsConfigDict

ENV_PREFIX = "SENTINEL_"
REDIS_URL_SCHEMES = ("redis", "rediss", "redis+cluster", "rediss+cluster", "unix")


class SettingsError(ValueError):
    """A setting is invalid; the message names the environment variable and what is allowed."""


class Settings(BaseSettings):
    """Platform configuration, from ``SENTINEL_*`` environment variables plus ``REDIS_URL``."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        extra="ignore",
        frozen=True,
        populate_by_name=True,
    )

    # --- Redis -------------------------------------------------------------------------
    redis_url: SecretStr | None = Field(
        default=None,
        validation_alias=AliasChoices("REDIS_URL", "SENTINEL_REDIS_URL"),
        description="redis://, rediss:// or redis+cluster:// URL; unset starts an embedded server",
    )
    redis_cluster: bool = Field(False, description="treat REDIS_URL as a Redis Cluster seed node")
    redis_server: str | None = Field(
        None, description="redis-server binary for the embedded server"
    )
    redis_port: int = Field(
        0, ge=0, le=65535, description="embedded server port; 0 picks a free one"
    )
    redis_socket_timeout_s: float = Field(10.0, gt=0, le=300)

    # --- streams and groups (wire-compatible with Sentinel-L7) --------------------------
    transactions_stream: str = Field("transactions", min_length=1)
    transactions_group: str = Field("sentinel-consumers", min_length=1)
    axioms_stream: str = Field("synapse:axioms", min_length=1)
    axioms_group: str = Field("axiom-workers", min_length=1)
    dlq_stream: str = Field("sentinel:dlq", min_length=1)
    dlq_maxlen: int = Field(100_000, ge=100)
    verdicts_stream: str = Field("sentinel:verdicts", min_length=1)
    compliance_stream: str = Field("sentinel:compliance_events", min_length=1)
    results_maxlen: int = Field(1_000_000, ge=100)
    recent_transactions_key: str = Field("sentinel:recent_transactions", min_length=1)
    recent_transactions_size: int = Field(50, ge=1, le=10_000)
    alerts_stream: str = Field("sentinel:alerts", min_length=1)
    alerts_maxlen: int = Field(10_000, ge=10)

    # --- recovery and delivery ---------------------------------------------------------
    reclaim_idle_ms: int = Field(30_000, ge=100, le=86_400_000)
    reclaim_delivery_limit: int = Field(3, ge=1, le=1000)
    lease_ttl_ms: int = Field(5_000, ge=200, le=600_000)
    hang_timeout_ms: int = Field(300_000, ge=1_000, le=86_400_000)
    retry_backoff_ms: int = Field(1_000, ge=0, le=600_000)
    idempotency_ttl_s: int = Field(7 * 24 * 3600, ge=60)
    lag_key_ttl_s: int = Field(10, ge=1, le=3600)
    read_count: int = Field(100, ge=1, le=10_000)
    block_ms: int = Field(1_000, ge=0, le=60_000)
    simulate_latency_ms: int = Field(0, ge=0, le=600_000)

    # --- backpressure --------------------------------------------------------------------
    lag_warn: int = Field(50, ge=1)
    lag_pause: int = Field(200, ge=2)
    lag_warn_sleep_ms: int = Field(500, ge=0, le=60_000)
    lag_pause_poll_ms: int = Field(100, ge=10, le=60_000)
    max_pause_s: float = Field(600, gt=0, le=86_400)
    publish_batch_size: int = Field(500, ge=1, le=100_000)

    # --- domain rules --------------------------------------------------------------------
    axiom_audit_threshold: float = Field(0.8, ge=0.0, le=1.0)
    high_risk_amount: float = Field(400.00, gt=0)
    analyzer_url: str | None = None
    analyzer_timeout_s: float = Field(5.0, gt=0, le=120)

    # --- alerting ------------------------------------------------------------------------
    alert_webhook_url: SecretStr | None = None
    alert_cooldown_s: int = Field(300, ge=0)
    alert_webhook_timeout_s: float = Field(2.0, gt=0, le=30)

    # --- Spark and Dagster ---------------------------------------------------------------
    spark_master: str = Field("local[*]", min_length=1)
    spark_conf: str = Field("", description="extra Spark config as comma-separated key=value pairs")
    home: Path = Field(Path(".sentinel"))
    demo: bool = Field(
        False,
        description="start the demo schedule (a small generated batch every few minutes) "
        "switched on; `sentinel up` sets it with the embedded Redis",
    )

    @field_validator("redis_url")
    @classmethod
    def _known_scheme(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value():
            return None
        scheme = urlsplit(value.get_secret_value()).scheme
        if scheme not in REDIS_URL_SCHEMES:
            allowed = ", ".join(f"{s}://" for s in REDIS_URL_SCHEMES)
            raise ValueError(f"scheme {scheme or '(none)'!r} is not one of {allowed}")
        return value

    @field_validator("spark_conf")
    @classmethod
    def _pairs(cls, value: str) -> str:
        for pair in filter(None, (p.strip() for p in value.split(","))):
            if "=" not in pair:
                raise ValueError(f"{pair!r} is not key=value")
        return value

    @model_validator(mode="after")
    def _coherent(self) -> Settings:
        if self.lag_warn >= self.lag_pause:
            raise ValueError(
                f"SENTINEL_LAG_WARN ({self.lag_warn}) must be below "
                f"SENTINEL_LAG_PAUSE ({self.lag_pause})"
            )
        if self.hang_timeout_ms <= self.lease_ttl_ms:
            raise ValueError(
                f"SENTINEL_HANG_TIMEOUT_MS ({self.hang_timeout_ms}) must be above "
                f"SENTINEL_LEASE_TTL_MS ({self.lease_ttl_ms})"
            )
        return self

    # --- derived values -----------------------------------------------------------------
    @property
    def is_cluster(self) -> bool:
        if self.redis_cluster:
            return True
        return self.redis_url is not None and "+cluster" in urlsplit(self.redis_url_value).scheme

    @property
    def redis_url_value(self) -> str:
        return self.redis_url.get_secret_value() if self.redis_url else ""

    @property
    def home_dir(self) -> Path:
        return self.home.expanduser().resolve()

    @property
    def spark_conf_pairs(self) -> dict[str, str]:
        pairs = (p.strip() for p in self.spark_conf.split(","))
        return dict(p.split("=", 1) for p in pairs if p)

    @property
    def dagster_home(self) -> Path:
        return self.home_dir / "dagster"

    @property
    def data_dir(self) -> Path:
        return self.home_dir / "data"

    @property
    def landing_dir(self) -> Path:
        return self.home_dir / "landing"


def _env_name(loc: tuple[object, ...]) -> str:
    field = str(loc[0]) if loc else ""
    if field in ("redis_url", "REDIS_URL"):
        return "REDIS_URL"
    return f"{ENV_PREFIX}{field.upper()}" if field else "settings"


def _explain(error: ValidationError) -> str:
    lines = []
    for item in error.errors():
        name = _env_name(item.get("loc", ()))
        message = item["msg"].removeprefix("Value error, ")
        if name == "settings":
            lines.append(message)
        else:
            lines.append(f"{name}={item.get('input')!r}: {message}")
    return "invalid settings:\n  " + "\n  ".join(lines)


def load_settings(**overrides: object) -> Settings:
    """Read and validate settings; raise :class:`SettingsError` naming each bad variable."""
    try:
        return Settings(**overrides)
    except ValidationError as error:
        raise SettingsError(_explain(error)) from None


@lru_cache(maxsize=1)
def get_settings() -> Settings:
    """Process-wide settings, read once (processes are configured by their environment)."""
    return load_settings()


def redact_url(url: str) -> str:
    """Hide the password of a URL so it can be logged; keep the user to ease debugging."""
    if not url:
        return url
    parts = urlsplit(url)
    if parts.password is None:
        return url
    user = parts.username or ""
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    netloc = f"{user}:***@{host}{port}" if user else f":***@{host}{port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))
