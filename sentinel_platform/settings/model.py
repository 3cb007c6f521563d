"""The settings model, whole: :class:`Settings`, its checks and :func:`load_settings`."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import parse_qsl, urlsplit

from pydantic import (
    AliasChoices,
    Field,
    SecretStr,
    ValidationError,
    ValidationInfo,
    ValidatorFunctionWrapHandler,
    field_serializer,
    field_validator,
    model_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from sentinel_platform.redaction import redact_url as redact_url  # shown URLs: always redacted
from sentinel_platform.redaction import remember_secret, scrub
from sentinel_platform.storage_uri import as_uri, registered_schemes, storage_problem

ENV_PREFIX = "SENTINEL_"
REDIS_URL_SCHEMES = ("redis", "rediss", "redis+cluster", "rediss+cluster", "unix")
#: The Dagster instance's PostgreSQL URL is a SQLAlchemy URL naming psycopg2: SQLAlchemy
#: 2.1 reads a bare ``postgresql://`` as psycopg 3, which dagster-postgres does not support.
POSTGRES_URL_SCHEMES = ("postgresql+psycopg2",)


AUTO = "auto"
DEFAULT_MAX_CONCURRENCY = 256
#: The lowest fleet rate limit for the analyzer, one call a minute. Below it a call's slot
#: is minutes away: each waiting call holds a worker's thread, a message and its claim
#: that long, a stop or restart throws the reserved slots away, and the fleet passes one
#: message a minute, which no stream lives with (quotas are per minute at the finest).
ANALYZER_MIN_RATE_PER_S = 1 / 60


class AutoConcurrency(int):
    """``SENTINEL_WORKER_CONCURRENCY=auto``: an ``int`` worth the maximum in-flight limit
    (what readers that need one number use to size threads and connection pools) that
    remembers it stands for an adaptive limit (:attr:`Settings.worker_concurrency_pinned`)."""


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
        description="redis://, rediss:// (TLS) or redis+cluster:// URL with user/password "
        "(secret: never shown); unset starts the embedded server",
    )
    redis_cluster: bool = Field(False, description="treat REDIS_URL as a Redis Cluster seed node")
    redis_server: str | None = Field(
        None,
        description="redis-server/valkey-server binary (7.0+) for the embedded server and "
        "the tests",
    )
    redis_port: int = Field(
        0,
        ge=0,
        le=65535,
        description="embedded server port; 0 picks a free one (kept across restarts)",
    )
    redis_socket_timeout_s: float = Field(
        10.0, gt=0, le=300, description="socket timeout of every Redis client"
    )
    allow_evicting_server: bool = Field(
        False,
        description="run on a server whose maxmemory-policy is allkeys-* (it may evict the "
        "streams, markers and leases: messages lost or applied twice); refused otherwise; "
        "noeviction is the safe policy, volatile-* runs with a warning",
    )

    # --- streams and groups (wire-compatible with Sentinel-L7) --------------------------
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

    # --- recovery and delivery ---------------------------------------------------------
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

    # --- stream retention (see streams/retention.py) ------------------------------------
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

    @model_validator(mode="after")
    def _retention_within_markers(self) -> Settings:
        """Every entry still in a stream must be covered by its idempotency marker."""
        if not self.stream_retention_enabled:
            return self
        limit = self.idempotency_ttl_s - self.stream_retention_interval_s
        if limit < 0:
            raise ValueError(
                f"SENTINEL_STREAM_RETENTION_INTERVAL_S ({self.stream_retention_interval_s}) "
                f"must be at most SENTINEL_IDEMPOTENCY_TTL_S ({self.idempotency_ttl_s})"
            )
        window = self.stream_retention_s
        if window is not None and window > limit:
            raise ValueError(
                f"SENTINEL_STREAM_RETENTION_S ({window}) must be at most "
                f"SENTINEL_IDEMPOTENCY_TTL_S - SENTINEL_STREAM_RETENTION_INTERVAL_S "
                f"({limit}): an entry kept longer than its idempotency marker could be "
                "applied twice"
            )
        return self

    @property
    def retention_window_s(self) -> int:
        """How long acknowledged entries stay: the setting, else one day within the markers."""
        if self.stream_retention_s is not None:
            return self.stream_retention_s
        return max(0, min(86_400, self.idempotency_ttl_s - self.stream_retention_interval_s))

    # --- backpressure --------------------------------------------------------------------
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

    # --- domain rules --------------------------------------------------------------------
    axiom_audit_threshold: float = Field(
        0.8,
        ge=0.0,
        le=1.0,
        description="axioms scoring strictly above it go to the analyzer",
    )
    high_risk_amount: float = Field(
        400.00, gt=0, description="rule-based threat threshold for transactions"
    )
    analyzer_url: SecretStr | None = Field(
        None,
        description="http(s):// analyzer asked about every transaction and every audited "
        "axiom; user:password@ becomes Basic auth (secret: never shown); unset uses the rules",
    )
    analyzer_timeout_s: float = Field(
        5.0,
        gt=0,
        le=120,
        description="analyzer timeout for connecting and answering; on failure the rules "
        "decide (driver_used=fallback)",
    )
    analyzer_breaker_failures: int = Field(
        5,
        ge=1,
        le=1000,
        description="consecutive analyzer failures or timeouts that open its circuit "
        "breaker: calls then fail at once and the rules decide (docs/analyzer.md)",
    )
    analyzer_breaker_cooldown_s: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="how long an open analyzer breaker refuses calls before one probe "
        "call may try again (a Retry-After is not a failure: it holds the fleet's calls, "
        "not the breaker)",
    )
    analyzer_when_down: Literal["rules", "wait"] = Field(
        "rules",
        description="an analyzer that is down (refused, timing out, 5xx without Retry-After, "
        "breaker open): rules decides by the rules (driver_used=fallback); wait keeps the "
        "message waiting for the analyzer (docs/analyzer.md). A busy analyzer (429, 503 with "
        "Retry-After) always means wait",
    )
    analyzer_id: str | None = Field(
        None,
        min_length=1,
        max_length=100,
        pattern=r"^[A-Za-z0-9._:-]+$",
        description="names the analyzer service in the fleet's shared Retry-After hold and "
        "rate limit; unset: a hash of the URL's scheme, host, port and path (never its "
        "credentials), so workers calling one URL share them",
    )
    analyzer_rate_limit: float | None = Field(
        None,
        gt=0,
        le=1000,
        description="most analyzer calls per second across all workers (one shared Redis "
        "limiter, fair between workers; at least 1/60, one call a minute, and at most "
        "1000, one call a millisecond); unset: no limit",
    )
    analyzer_tokens_per_minute: int | None = Field(
        None,
        gt=0,
        description="most model tokens per minute across all workers (one shared Redis "
        "budget: each call reserves its prompt's estimate plus its max_tokens and is "
        "settled with the answer's usage); unset: only the limits the API announces "
        "(x-ratelimit-*, anthropic-ratelimit-* headers), learnt with no setting",
    )
    analyzer_daily_tokens: int | None = Field(
        None,
        gt=0,
        description="most model tokens per UTC day across all workers; spent, the analyzer "
        "is exhausted (held with an ERROR alert) until midnight UTC or `sentinel analyzer "
        "release`; unset: no daily budget",
    )

    analyzer_api: Literal["openai", "anthropic", "sentinel"] | None = Field(
        None,
        description="what SENTINEL_ANALYZER_URL speaks: openai (Chat Completions at a base URL "
        "such as https://api.openai.com/v1: OpenAI, Azure OpenAI, Gemini, vLLM, Ollama, "
        "llama.cpp, OpenRouter), anthropic (the Messages API), sentinel (the platform's own "
        "{kind, payload} contract); unset: sentinel, refused for a known model API's URL "
        "(docs/analyzer.md)",
    )
    analyzer_model: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="the model the openai and anthropic APIs are asked for (e.g. gpt-4o-mini, "
        "claude-3-5-haiku-latest); required for them",
    )
    analyzer_api_key: SecretStr | None = Field(
        None,
        description="the model API's key, sent as Authorization: Bearer (Azure: api-key; "
        "Anthropic: x-api-key); secret: never shown. Or SENTINEL_ANALYZER_API_KEY_FILE",
    )
    analyzer_api_key_file: Path | None = Field(
        None,
        description="a file holding the model API's key (a mounted secret), read at start-up; "
        "exclusive with SENTINEL_ANALYZER_API_KEY",
    )
    analyzer_max_output_tokens: int = Field(
        400,
        ge=16,
        le=32_000,
        description="most tokens the model may write per verdict (sent as max_tokens; the "
        "verdict itself needs about 100)",
    )
    analyzer_response_format: Literal["json_schema", "json_object"] = Field(
        "json_schema",
        description="how the openai API is asked for the verdict's JSON schema: json_schema "
        "(OpenAI, Azure, Gemini, vLLM, Ollama, OpenRouter) or json_object with the schema "
        "beside it (llama.cpp's Python server, which answers json_schema with HTTP 500)",
    )
    analyzer_transactions_prompt_file: Path | None = Field(
        None,
        description="a text file replacing the packaged instructions the model gets for "
        "each transaction (its content hash becomes the verdicts' prompt_version)",
    )
    analyzer_axioms_prompt_file: Path | None = Field(
        None,
        description="a text file replacing the packaged instructions the model gets for "
        "each audited axiom (its content hash becomes the events' prompt_version)",
    )
    analyzer_price_input_per_mtok: float | None = Field(
        None,
        ge=0,
        description="the model's price per million prompt tokens, for the cost the reporting "
        "assets show (with SENTINEL_ANALYZER_PRICE_OUTPUT_PER_MTOK; unset: tokens only)",
    )
    analyzer_price_output_per_mtok: float | None = Field(
        None,
        ge=0,
        description="the model's price per million completion tokens (with "
        "SENTINEL_ANALYZER_PRICE_INPUT_PER_MTOK; unset: tokens only, no cost)",
    )
    analyzer_price_cached_input_per_mtok: float | None = Field(
        None,
        ge=0,
        description="the price per million prompt tokens served from the provider's prompt "
        "cache (unset: billed at SENTINEL_ANALYZER_PRICE_INPUT_PER_MTOK)",
    )

    # --- alerting ------------------------------------------------------------------------
    alert_webhook_url: SecretStr | None = Field(
        None, description="POST alerts here (secret: never logged)"
    )
    alert_cooldown_s: int = Field(
        300, ge=0, description="silence for repeats of one alert condition"
    )
    alert_webhook_timeout_s: float = Field(2.0, gt=0, le=30, description="webhook request timeout")
    observation_max_interval_s: int = Field(
        300,
        ge=1,
        le=86_400,
        description="the lag sensor records an observation when the lag changes, on any "
        "peak, and at least this often",
    )

    # --- Spark and Dagster ---------------------------------------------------------------
    spark_master: str = Field(
        "local[*]",
        min_length=1,
        description="Spark master URL (spark://host:7077 for a cluster, sc://host:15002 for "
        "Spark Connect)",
    )
    spark_conf: str = Field(
        "",
        description="extra Spark config: a JSON object of strings, or comma-separated "
        "key=value pairs (values without commas)",
    )
    home: Path = Field(
        Path(".sentinel"), description="embedded Redis data, Dagster home, data files, logs"
    )
    data_dir: str | None = Field(
        None,
        description="where the Parquet assets live: a URI (file://, hdfs://, s3a://, abfss://, "
        "...) or a local path; unset means $SENTINEL_HOME/data",
    )
    landing_dir: str | None = Field(
        None,
        description="root of the landing files (<feed>/[<day>/]*.csv|json|parquet), URI or "
        "local path; unset means $SENTINEL_HOME/landing",
    )
    demo: bool = Field(
        False,
        description="start the demo schedule (a small generated batch every few minutes) "
        "switched on; `sentinel up` sets it with the embedded Redis",
    )

    # --- the Dagster instance (see cli/dagster_home.py) ----------------------------------
    dagster_postgres_url: SecretStr | None = Field(
        None,
        description="postgresql+psycopg2:// URL of the Dagster instance's run, event and "
        "schedule storage (secret: never shown; read from the environment by dagster.yaml, "
        "never written into it); unset: SQLite under $SENTINEL_HOME/dagster",
    )
    dagster_max_concurrent_runs: int | None = Field(
        None,
        ge=1,
        le=256,
        description="most Dagster runs (each a Spark driver JVM) in progress at once; unset: "
        "half the CPU cores, at least 2; publish runs of one stream run one at a time",
    )

    @field_validator("*", mode="before")
    @classmethod
    def _remember_secrets(cls, value: Any, info: ValidationInfo) -> Any:
        """Every secret value read, valid or not, is masked by ``scrub`` from now on, so no
        error text (a driver's quoting part of it, say) can show its password."""
        field = cls.model_fields.get(info.field_name or "")
        if field is not None and "SecretStr" in str(field.annotation):
            raw = value.get_secret_value() if isinstance(value, SecretStr) else value
            if isinstance(raw, str) and raw:
                remember_secret(raw)
        return value

    @field_validator("redis_url")
    @classmethod
    def _known_scheme(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value():
            return None
        problem = url_problem(value.get_secret_value(), REDIS_URL_SCHEMES) or tls_problem(
            value.get_secret_value()
        )
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("analyzer_url")
    @classmethod
    def _http_analyzer(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value():
            return None
        problem = url_problem(value.get_secret_value(), ("http", "https"), needs_host=True)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("analyzer_api_key")
    @classmethod
    def _blank_key_is_none(cls, value: SecretStr | None) -> SecretStr | None:
        return value if value is not None and value.get_secret_value().strip() else None

    @field_validator("analyzer_rate_limit")
    @classmethod
    def _livable_rate(cls, value: float | None) -> float | None:
        if value is not None and value < ANALYZER_MIN_RATE_PER_S:
            raise ValueError(
                f"{value:g} calls/s is below the lowest rate a fleet lives with, "
                f"{ANALYZER_MIN_RATE_PER_S:.4f}/s (one call a minute): a call would wait "
                f"{1 / value:.0f} s for its slot"
            )
        return value

    @field_validator("dagster_postgres_url")
    @classmethod
    def _postgres_url(cls, value: SecretStr | None) -> SecretStr | None:
        if value is None or not value.get_secret_value():
            return None
        problem = url_problem(value.get_secret_value(), POSTGRES_URL_SCHEMES)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("stream_modules", mode="before")
    @classmethod
    def _comma_separated(cls, value: Any) -> Any:
        if isinstance(value, str):
            return [name.strip() for name in value.split(",") if name.strip()]
        return value

    @field_validator("spark_conf")
    @classmethod
    def _pairs(cls, value: str) -> str:
        parse_spark_conf(value)
        return value

    @field_validator("data_dir", "landing_dir")
    @classmethod
    def _storage_root(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None or not value.strip():
            return None
        try:
            pairs = parse_spark_conf(info.data.get("spark_conf") or "")
        except ValueError:  # reported on SENTINEL_SPARK_CONF itself
            pairs = {}
        problem = storage_problem(value, registered_schemes(pairs))
        if problem:
            raise ValueError(problem)
        return value

    @model_validator(mode="after")
    def _coherent(self) -> Settings:
        warn, pause = self.lag_warn, self.lag_pause
        if warn is not None and pause is not None and warn >= pause:
            raise ValueError(
                f"SENTINEL_LAG_WARN ({warn}) must be below SENTINEL_LAG_PAUSE ({pause})"
            )
        if self.lag_warn_s >= self.lag_pause_s:
            raise ValueError(
                f"SENTINEL_LAG_WARN_S ({self.lag_warn_s}) must be below "
                f"SENTINEL_LAG_PAUSE_S ({self.lag_pause_s})"
            )
        if self.hang_timeout_ms <= self.lease_ttl_ms:
            raise ValueError(
                f"SENTINEL_HANG_TIMEOUT_MS ({self.hang_timeout_ms}) must be above "
                f"SENTINEL_LEASE_TTL_MS ({self.lease_ttl_ms})"
            )
        check_model_api(self)
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
        return parse_spark_conf(self.spark_conf)

    @property
    def analyzer_api_kind(self) -> Literal["openai", "anthropic", "sentinel"]:
        """The API the analyzer speaks: ``SENTINEL_ANALYZER_API``, else ``sentinel``."""
        return self.analyzer_api or "sentinel"

    @property
    def analyzer_key_value(self) -> str:
        """The model API's key (``SENTINEL_ANALYZER_API_KEY``, else the file's content,
        stripped), or "" when neither is set. Read from the file on each call: a worker
        reads it once, at start-up."""
        if self.analyzer_api_key is not None:
            return self.analyzer_api_key.get_secret_value()
        if self.analyzer_api_key_file is None:
            return ""
        return read_key_file(self.analyzer_api_key_file)

    @property
    def dagster_home(self) -> Path:
        return self.home_dir / "dagster"

    @property
    def dagster_postgres_url_value(self) -> str:
        return self.dagster_postgres_url.get_secret_value() if self.dagster_postgres_url else ""

    @property
    def max_concurrent_runs(self) -> int:
        """The run queue's total: the setting, else half the cores (each run is a Spark JVM
        using every core it is given), at least 2."""
        if self.dagster_max_concurrent_runs is not None:
            return self.dagster_max_concurrent_runs
        return max(2, (os.cpu_count() or 2) // 2)

    @property
    def data_uri(self) -> str:
        """URI of the Parquet assets' root (``SENTINEL_DATA_DIR``, else under the home)."""
        return as_uri(self.data_dir or self.home_dir / "data")

    @property
    def landing_uri(self) -> str:
        """URI of the landing files' root (``SENTINEL_LANDING_DIR``, else under the home)."""
        return as_uri(self.landing_dir or self.home_dir / "landing")


def parse_spark_conf(value: str) -> dict[str, str]:
    """``SENTINEL_SPARK_CONF`` as a dict: a JSON object of strings (any value, commas
    included, e.g. ``spark.jars.packages``), or comma-separated ``key=value`` pairs for the
    simple case. Raises ValueError saying which form was expected."""
    text = value.strip()
    if text.startswith(("{", "[")):
        try:
            loaded = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"is not valid JSON ({exc.msg} at {exc.pos})") from None
        if not isinstance(loaded, dict) or not all(
            isinstance(k, str) and isinstance(v, str) for k, v in loaded.items()
        ):
            raise ValueError('must be a JSON object of strings, e.g. {"spark.x": "1"}')
        return loaded
    pairs = {}
    for pair in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in pair:
            raise ValueError(f"{pair!r} is not key=value (or give a JSON object of strings)")
        key, item = pair.split("=", 1)
        pairs[key.strip()] = item
    return pairs


def read_key_file(path: Path) -> str:
    """The key in ``path`` without surrounding white space (a mounted secret often ends in a
    newline), remembered as a secret; ValueError naming the setting when it cannot be read
    or is empty. The error never quotes the file's content."""
    name = "SENTINEL_ANALYZER_API_KEY_FILE"
    try:
        key = path.expanduser().read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"{name}: cannot read {str(path)!r} ({type(exc).__name__})") from None
    if not key:
        raise ValueError(f"{name}: {str(path)!r} is empty")
    remember_secret(key)
    return key


#: Domains of model APIs (a host or any host below it), and the API each speaks.
MODEL_API_HOSTS = (
    ("api.openai.com", "openai"),
    ("openai.azure.com", "openai"),
    ("generativelanguage.googleapis.com", "openai"),
    ("openrouter.ai", "openai"),
    ("api.anthropic.com", "anthropic"),
)


def model_api_host(url: str) -> tuple[str, str] | None:
    """``(host, api)`` when ``url`` is a known model API's, else None."""
    try:
        host = (urlsplit(url).hostname or "").lower()
    except ValueError:
        return None
    for domain, api in MODEL_API_HOSTS:
        if host == domain or host.endswith(f".{domain}"):
            return host, api
    return None


def check_model_api(settings: Settings) -> None:
    """Refuse, naming the setting, what cannot call a model API: a known model API's URL
    with no ``SENTINEL_ANALYZER_API`` (today's contract would be sent to it and every
    verdict fall back to the rules), no model for openai or anthropic, an API without a
    URL, both key settings, an unreadable or empty key file."""
    api = settings.analyzer_api
    hosted = model_api_host(
        settings.analyzer_url.get_secret_value() if settings.analyzer_url else ""
    )
    if api is None and hosted is not None:
        raise ValueError(
            f"SENTINEL_ANALYZER_URL names {hosted[0]}, a model API: set "
            f"SENTINEL_ANALYZER_API={hosted[1]} (and SENTINEL_ANALYZER_MODEL); unset, the "
            "platform's own contract would be sent to it"
        )
    if api is not None and settings.analyzer_url is None:
        raise ValueError(f"SENTINEL_ANALYZER_API={api} needs SENTINEL_ANALYZER_URL")
    if api in ("openai", "anthropic") and settings.analyzer_model is None:
        raise ValueError(f"SENTINEL_ANALYZER_MODEL is required with SENTINEL_ANALYZER_API={api}")
    if settings.analyzer_api_key is not None and settings.analyzer_api_key_file is not None:
        raise ValueError(
            "SENTINEL_ANALYZER_API_KEY and SENTINEL_ANALYZER_API_KEY_FILE are both set: keep one"
        )
    if settings.analyzer_api_key_file is not None:
        read_key_file(settings.analyzer_api_key_file)


def url_problem(url: str, schemes: tuple[str, ...], needs_host: bool = False) -> str | None:
    """Why ``url`` is not a usable URL of one of ``schemes``, or None. The reason never
    quotes the URL, so it is safe to show whatever the URL carries."""
    allowed = ", ".join(f"{s}://" for s in schemes)
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018 - raises on a port that is not a number 0-65535
    except ValueError:
        return f"is not a valid URL (host or port malformed); expected {allowed}"
    if parts.scheme not in schemes:
        return f"scheme {parts.scheme or '(none)'!r} is not one of {allowed}"
    if needs_host and not parts.hostname:
        return f"has no host; expected {allowed}host[:port]/path"
    return None


def tls_problem(url: str) -> str | None:
    """Why a Redis URL's TLS options cannot work, or None: redis-py's ``ssl_*`` options
    on a plain ``redis://`` (or ``unix://``) URL fail at connect with a ``TypeError``.
    Names the options, never their values."""
    parts = urlsplit(url)
    names = sorted({k for k, _ in parse_qsl(parts.query, keep_blank_values=True) if "ssl" in k})
    if names and not parts.scheme.startswith("rediss"):
        return (
            f"has TLS options ({', '.join(names)}) but scheme {parts.scheme!r} does not use "
            "TLS: use rediss:// (or rediss+cluster://)"
        )
    return None


def _env_name(loc: tuple[object, ...]) -> str:
    field = str(loc[0]) if loc else ""
    if field in ("redis_url", "REDIS_URL"):
        return "REDIS_URL"
    return f"{ENV_PREFIX}{field.upper()}" if field else "settings"


def _is_secret(loc: tuple[object, ...]) -> bool:
    """The field (or alias, e.g. ``REDIS_URL``) may hold a credential: it is a ``SecretStr``."""
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        aliases = alias.choices if isinstance(alias, AliasChoices) else (alias,)
        if loc and loc[0] in (name, *aliases):
            return "SecretStr" in str(field.annotation)
    return False


def _shown_input(value: object, secret: bool) -> str:
    """The rejected value as an error may show it: a secret only as a redacted URL."""
    if isinstance(value, SecretStr):
        value = value.get_secret_value()
    if secret and not (isinstance(value, str) and "://" in value):
        return "(hidden)"
    return repr(redact_url(value) if isinstance(value, str) else value)


def _explain(error: ValidationError) -> str:
    """One line per rejected variable: its name, its value (passwords hidden), the reason.

    The whole text is scrubbed once more, because a reason may quote part of a value.
    """
    lines = []
    for item in error.errors():
        loc = item.get("loc", ())
        name = _env_name(loc)
        message = item["msg"].removeprefix("Value error, ")
        if name == "settings":
            lines.append(message)
        else:
            lines.append(f"{name}={_shown_input(item.get('input'), _is_secret(loc))}: {message}")
    return scrub("invalid settings:\n  " + "\n  ".join(lines))


def load_settings(**overrides: Any) -> Settings:
    """Read and validate settings; raise :class:`SettingsError` naming each bad variable.

    The error is raised outside the ``except`` block so that pydantic's own error, which
    quotes every rejected input verbatim, is not even attached as context.
    """
    try:
        return Settings(**overrides)
    except ValidationError as error:
        message = _explain(error)
    raise SettingsError(message)
