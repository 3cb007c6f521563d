"""``AlertSink``: the Dagster resource sensors and checks raise alerts through.

Configuration comes from the environment (``SENTINEL_ALERT_*``, ``REDIS_URL``) like every
other process; ``overrides`` exists for tests and one-off deployments and takes
settings field names. The webhook URL stays a ``SecretStr`` end to end; overrides are
shown in the Dagster UI, so a secret setting carrying a password there is refused
(``config_secrets.py``), here and in ``StreamInspector``.
"""

from __future__ import annotations

import dagster as dg
from pydantic import Field, PrivateAttr, field_validator

from sentinel_platform.alerting.cooldown import Cooldown
from sentinel_platform.alerting.model import Alert
from sentinel_platform.alerting.sink import Alerter, Delivery
from sentinel_platform.alerting.webhook import WebhookSender, shared_sender
from sentinel_platform.resources.config_secrets import refuse_passwords_in_overrides
from sentinel_platform.settings import Settings, get_settings, load_settings
from sentinel_platform.streams.connection import RedisClient, connect


def settings_from(overrides: dict[str, str]) -> Settings:
    """Environment settings, with explicit overrides (field names) on top."""
    return load_settings(**overrides) if overrides else get_settings()


class AlertSink(dg.ConfigurableResource):
    """Log + Redis alert stream + optional webhook, with a Redis-backed cool-down."""

    overrides: dict[str, str] = Field(
        default_factory=dict,
        description="settings overrides by field name (e.g. alert_cooldown_s); env otherwise",
    )

    _client: RedisClient | None = PrivateAttr(default=None)
    _alerter: Alerter | None = PrivateAttr(default=None)

    @field_validator("overrides")
    @classmethod
    def _no_password(cls, value: dict[str, str]) -> dict[str, str]:
        """Refuse a secret setting carrying a password (shown in the UI), never quoting it."""
        refuse_passwords_in_overrides("AlertSink", value)
        return value

    def get_settings(self) -> Settings:
        return settings_from(self.overrides)

    def webhook(self) -> WebhookSender | None:
        settings = self.get_settings()
        if settings.alert_webhook_url is None:
            return None
        return shared_sender(settings.alert_webhook_url, settings.alert_webhook_timeout_s)

    def alerter(self) -> Alerter:
        if self._alerter is None:
            settings = self.get_settings()
            self._client = connect(settings)
            self._alerter = Alerter(
                self._client,
                settings.alerts_stream,
                settings.alerts_maxlen,
                Cooldown(self._client, settings.alert_cooldown_s),
                self.webhook(),
            )
        return self._alerter

    def send(self, alert: Alert) -> Delivery:
        return self.alerter().send(alert)

    def teardown_after_execution(self, context: dg.InitResourceContext) -> None:
        if self._client is not None:
            self._client.close()
        self._client = None
        self._alerter = None
