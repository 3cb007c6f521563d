"""``AlertSink``: the Dagster resource sensors and checks raise alerts through.

Its configuration (``SENTINEL_ALERT_*``, ``REDIS_URL``) comes from the settings resource
it holds (the environment's settings when none is given), like everything else in the
Dagster code. The webhook URL stays a ``SecretStr`` end to end.
"""

from __future__ import annotations

import dagster as dg
from pydantic import PrivateAttr

from sentinel_platform.alerting.cooldown import Cooldown
from sentinel_platform.alerting.model import Alert
from sentinel_platform.alerting.sink import Alerter, Delivery
from sentinel_platform.alerting.webhook import WebhookSender, shared_sender
from sentinel_platform.resources.settings import SettingsResource, settings_or_environment
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient, connect


class AlertSink(dg.ConfigurableResource):
    """Log + Redis alert stream + optional webhook, with a Redis-backed cool-down."""

    settings: SettingsResource | None = None

    _client: RedisClient | None = PrivateAttr(default=None)
    _alerter: Alerter | None = PrivateAttr(default=None)

    def _settings(self) -> Settings:
        return settings_or_environment(self.settings).load()

    def webhook(self) -> WebhookSender | None:
        settings = self._settings()
        if settings.alert_webhook_url is None:
            return None
        return shared_sender(settings.alert_webhook_url, settings.alert_webhook_timeout_s)

    def alerter(self) -> Alerter:
        if self._alerter is None:
            settings = self._settings()
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
