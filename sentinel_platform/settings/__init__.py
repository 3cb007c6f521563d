"""One settings model for the whole platform.

Every process (Dagster code location, workers, CLI, Spark executors) reads the same
environment variables through :class:`Settings`, so a value means the same thing
everywhere. Validation happens at start-up: a bad value fails the process immediately
with the variable's name and the allowed range, instead of surfacing hours later as
odd behaviour.

This package is the one way to reach the model: importers take every name from here, so
how the model is put together inside stays free to change.
"""

from __future__ import annotations

from sentinel_platform.settings.model import (
    ANALYZER_MIN_RATE_PER_S,
    AUTO,
    DEFAULT_MAX_CONCURRENCY,
    ENV_PREFIX,
    MODEL_API_HOSTS,
    POSTGRES_URL_SCHEMES,
    REDIS_URL_SCHEMES,
    AutoConcurrency,
    Settings,
    SettingsError,
    check_model_api,
    load_settings,
    model_api_host,
    parse_spark_conf,
    read_key_file,
    redact_url,
    tls_problem,
    url_problem,
)

__all__ = [
    "ANALYZER_MIN_RATE_PER_S",
    "AUTO",
    "DEFAULT_MAX_CONCURRENCY",
    "ENV_PREFIX",
    "MODEL_API_HOSTS",
    "POSTGRES_URL_SCHEMES",
    "REDIS_URL_SCHEMES",
    "AutoConcurrency",
    "Settings",
    "SettingsError",
    "check_model_api",
    "load_settings",
    "model_api_host",
    "parse_spark_conf",
    "read_key_file",
    "redact_url",
    "tls_problem",
    "url_problem",
]
