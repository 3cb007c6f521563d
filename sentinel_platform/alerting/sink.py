"""Fan one alert out to the log, the Redis alert stream and the webhook, in that order.

The Redis stream is written before the webhook is even queued, so a webhook that hangs
or fails loses nothing: the CLI reads the stream. The cool-down is decided first; a
suppressed alert is still logged (at debug) so nothing is silently swallowed.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

import redis
from redis.typing import EncodableT

from sentinel_platform.alerting.cooldown import Cooldown
from sentinel_platform.alerting.model import Alert
from sentinel_platform.alerting.webhook import WebhookSender
from sentinel_platform.streams.plumbing.connection import RedisClient

log = logging.getLogger("sentinel_platform.alerts")

_LEVELS = {
    "info": logging.INFO,
    "warning": logging.WARNING,
    "error": logging.ERROR,
    "critical": logging.CRITICAL,
}


@dataclass(frozen=True)
class Delivery:
    """What happened to one alert."""

    sent: bool
    stream_id: str | None = None
    webhook_queued: bool = False


class Alerter:
    """Deliver alerts through every configured channel, respecting the cool-down."""

    def __init__(
        self,
        client: RedisClient,
        alerts_stream: str,
        alerts_maxlen: int,
        cooldown: Cooldown,
        webhook: WebhookSender | None = None,
    ) -> None:
        self._client = client
        self._stream = alerts_stream
        self._maxlen = alerts_maxlen
        self._cooldown = cooldown
        self._webhook = webhook

    def send(self, alert: Alert) -> Delivery:
        if not self._admitted(alert):
            log.debug("alert suppressed by cool-down", extra=_fields(alert))
            return Delivery(sent=False)
        log.log(_LEVELS[alert.severity], alert.text(), extra=_fields(alert))
        stream_id = self._append(alert)
        queued = self._webhook.submit(alert) if self._webhook is not None else False
        return Delivery(sent=True, stream_id=stream_id, webhook_queued=queued)

    def _admitted(self, alert: Alert) -> bool:
        try:
            return self._cooldown.admit(alert.fingerprint, alert.rank)
        except redis.RedisError as exc:
            # Better a duplicate than a lost alert.
            log.error("alert cool-down unavailable, sending anyway", extra={"error": str(exc)})
            return True

    def _append(self, alert: Alert) -> str | None:
        fields: dict[EncodableT, EncodableT] = {k: v for k, v in alert.to_fields().items()}
        try:
            entry_id = self._client.xadd(
                self._stream, fields, maxlen=self._maxlen, approximate=True
            )
        except redis.RedisError as exc:
            log.error(
                "alert not written to the Redis alert stream",
                extra={**_fields(alert), "error": str(exc)},
            )
            return None
        return entry_id.decode() if isinstance(entry_id, bytes) else str(entry_id)


def _fields(alert: Alert) -> dict[str, str]:
    return {
        "severity": alert.severity,
        "source": alert.source,
        "stream": alert.stream or "",
        "condition": alert.condition,
        "details": json.dumps(alert.details, default=str, sort_keys=True)[:2000],
    }
