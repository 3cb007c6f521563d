"""One settings model for the whole platform.

Every process (Dagster code location, workers, CLI, Spark executors) reads the same
environment variables through :class:`Settings`, so a value means the same thing
everywhere. Validation happens at start-up: a bad value fails the process immediately
with the variable's name and the allowed range, instead of surfacing hours later as
odd behaviour.

This package is the one way to reach the model: importers take every name from here, so
how it is put together stays free to change. :class:`Settings` (``model``) is composed
from one part per concern, each in its module with its fields and checks:
``connection`` (Redis), ``streams``, ``delivery`` (recovery, delivery, concurrency),
``retention``, ``backpressure``, ``analyzer`` (domain rules and the analyzer),
``alerting``, ``dagster`` (Spark, storage, the Dagster instance); ``urls`` checks the URLs
they hold, ``loading`` reads the environment and explains a bad value.
"""

from __future__ import annotations

from sentinel_platform.redaction import redact_url  # shown URLs: always redacted
from sentinel_platform.settings.analyzer import (
    ANALYZER_MIN_RATE_PER_S,
    MODEL_API_HOSTS,
    check_model_api,
    model_api_host,
    read_key_file,
)
from sentinel_platform.settings.connection import REDIS_URL_SCHEMES
from sentinel_platform.settings.dagster import POSTGRES_URL_SCHEMES, parse_spark_conf
from sentinel_platform.settings.delivery import AUTO, DEFAULT_MAX_CONCURRENCY, AutoConcurrency
from sentinel_platform.settings.loading import SettingsError, load_settings
from sentinel_platform.settings.model import ENV_PREFIX, Settings
from sentinel_platform.settings.roles import ROLE_FIELDS, ROLES, Role, role_env_name, role_settings
from sentinel_platform.settings.urls import tls_problem, url_problem

__all__ = [
    "ANALYZER_MIN_RATE_PER_S",
    "AUTO",
    "DEFAULT_MAX_CONCURRENCY",
    "ENV_PREFIX",
    "MODEL_API_HOSTS",
    "POSTGRES_URL_SCHEMES",
    "REDIS_URL_SCHEMES",
    "ROLES",
    "ROLE_FIELDS",
    "AutoConcurrency",
    "Role",
    "Settings",
    "SettingsError",
    "check_model_api",
    "load_settings",
    "model_api_host",
    "parse_spark_conf",
    "read_key_file",
    "redact_url",
    "role_env_name",
    "role_settings",
    "tls_problem",
    "url_problem",
]
