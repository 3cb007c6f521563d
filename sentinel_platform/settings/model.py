"""The settings model, whole: :class:`Settings`, composed from one part per concern.

Each part (a pydantic model in its own module) holds its fields, the checks of a single
field and what is derived from its own fields alone. Pydantic collects the fields of a
model with several bases from the most basic class up (the reversed method resolution
order), so the parts are listed last to first: the fields keep one order, which the
generated reference (``docs/settings.md``) and the order of per-field errors follow.

What spans parts lives here: the secrets every part may hold, and the rules across
settings, checked in one fixed order so a start with several broken rules always reports
the same one.
"""

from __future__ import annotations

from typing import Any

from pydantic import SecretStr, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from sentinel_platform.redaction import remember_secret
from sentinel_platform.settings.alerting import AlertingSettings
from sentinel_platform.settings.analyzer import (
    AnalyzerSettings,
    check_call_within_hang,
    check_model_api,
)
from sentinel_platform.settings.backpressure import BackpressureSettings, check_lag_limits
from sentinel_platform.settings.batch import BatchSettings
from sentinel_platform.settings.connection import ConnectionSettings
from sentinel_platform.settings.dagster import DagsterSettings
from sentinel_platform.settings.delivery import DeliverySettings, check_hang_timeout
from sentinel_platform.settings.lanes import LaneSettings
from sentinel_platform.settings.retention import (
    RetentionSettings,
    check_retention_within_markers,
    retention_window_s,
)
from sentinel_platform.settings.streams import StreamSettings

ENV_PREFIX = "SENTINEL_"


class Settings(
    DagsterSettings,
    AlertingSettings,
    BatchSettings,
    LaneSettings,
    AnalyzerSettings,
    BackpressureSettings,
    RetentionSettings,
    DeliverySettings,
    StreamSettings,
    ConnectionSettings,
    BaseSettings,
):
    """Platform configuration, from ``SENTINEL_*`` environment variables plus ``REDIS_URL``."""

    # The fields come in the order Redis connection, streams, delivery, retention,
    # backpressure, domain rules and analyzer, alerting, Dagster: the reverse of the bases.

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        extra="ignore",
        frozen=True,
        populate_by_name=True,
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

    @model_validator(mode="after")
    def _retention_within_markers(self) -> Settings:
        """Every entry still in a stream must be covered by its idempotency marker."""
        check_retention_within_markers(self, self.idempotency_ttl_s)
        return self

    @model_validator(mode="after")
    def _coherent(self) -> Settings:
        """The lag limits, the hang timeout over the lease, what a model API needs, an
        analyzer call within the hang timeout: in this order, after the retention above."""
        check_lag_limits(self)
        check_hang_timeout(self)
        check_model_api(self)
        check_call_within_hang(self, self.hang_timeout_ms)
        return self

    @property
    def retention_window_s(self) -> int:
        """How long acknowledged entries stay: the setting, else one day within the markers."""
        return retention_window_s(self, self.idempotency_ttl_s)
