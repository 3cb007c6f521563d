"""Alerting settings: the webhook alerts are posted to, its cool-down, and how often the
lag sensor records an observation."""

from __future__ import annotations

from pydantic import BaseModel, Field, SecretStr


class AlertingSettings(BaseModel):
    """Alerts and observations: a part of :class:`~sentinel_platform.settings.Settings`."""

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
