"""Alert delivery: cool-down in Redis, Slack payloads, and webhooks that hang or fail."""

from __future__ import annotations

import logging
import time

import pytest

from sentinel_platform.alerting.cooldown import Cooldown
from sentinel_platform.alerting.model import Alert
from sentinel_platform.alerting.sink import Alerter
from sentinel_platform.alerting.webhook import WebhookSender
from sentinel_platform.domains.operations.dead_letters import dead_letter_queue_sensor
from sentinel_platform.resources.alerts import AlertSink
from sentinel_platform.resources.settings import SettingsResource
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform_tests.domains.operations.test_dead_letters import dead_letter
from sentinel_platform_tests.harness.operations import read_alerts, tick
from sentinel_platform_tests.harness.waits import wait_until

#: A tick must return within this, whatever the webhook does: roomy for a loaded machine,
#: yet below one webhook timeout in the test below (a hanging webhook holds a request 10 s).
TICK_BUDGET_S = 5.0


def alert(severity: str = "warning", condition: str = "c1") -> Alert:
    return Alert(
        severity=severity,  # type: ignore[arg-type]
        source="test",
        stream="transactions",
        summary="something\nhappened",
        condition=condition,
        details={"n": 1},
    )


def alerter(client: RedisClient, settings: Settings, cooldown_s: int) -> Alerter:
    return Alerter(
        client, settings.alerts_stream, settings.alerts_maxlen, Cooldown(client, cooldown_s)
    )


def test_cooldown_suppresses_repeats_across_restarts_unless_severity_worsens(
    redis_client: RedisClient, settings: Settings
) -> None:
    first = alerter(redis_client, settings, cooldown_s=300)
    assert first.send(alert("warning")).sent
    restarted = alerter(redis_client, settings, cooldown_s=300)  # state lives in Redis
    assert not restarted.send(alert("warning")).sent
    assert not restarted.send(alert("info")).sent
    assert restarted.send(alert("error")).sent
    assert restarted.send(alert("warning", condition="c2")).sent
    stored = read_alerts(redis_client, settings)
    assert [(a.severity, a.condition) for a in stored] == [
        ("warning", "c1"),
        ("error", "c1"),
        ("warning", "c2"),
    ]
    assert stored[0].summary == "something happened"  # one line


def test_alert_stream_is_capped(redis_client: RedisClient, settings: Settings) -> None:
    sink = Alerter(redis_client, settings.alerts_stream, 10, Cooldown(redis_client, 0))
    for i in range(300):
        sink.send(alert(condition=f"c{i}"))
    assert redis_client.xlen(settings.alerts_stream) < 300


def test_webhook_receives_slack_text_payload(
    redis_client: RedisClient, settings: Settings, webhook_factory
) -> None:
    server = webhook_factory("ok")
    overrides = {"redis_url": settings.redis_url_value, "alert_webhook_url": server.url}
    sink = AlertSink(settings=SettingsResource(overrides=overrides))
    delivery = sink.send(alert("error"))
    assert delivery.sent and delivery.webhook_queued and delivery.stream_id
    wait_until(lambda: server.bodies, timeout_s=5)
    assert server.bodies == [{"text": "[ERROR] test [transactions]: something happened"}]


@pytest.mark.parametrize("mode", ["hang", "fail"])
def test_broken_webhook_delays_no_tick_and_loses_no_alert(
    mode: str,
    redis_client: RedisClient,
    settings: Settings,
    make_resources,
    dagster_instance,
    webhook_factory,
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = webhook_factory(mode)
    # Timeout above the budget: a tick that waited for even one attempt would exceed it.
    resources = make_resources(alert_webhook_url=server.url, alert_webhook_timeout_s=6.0)
    first = tick(dead_letter_queue_sensor, dagster_instance, resources, None)
    redis_client.xadd(settings.dlq_stream, dead_letter("1-0", "transactions").to_fields())

    caplog.set_level(logging.DEBUG)
    started = time.monotonic()
    tick(dead_letter_queue_sensor, dagster_instance, resources, first.cursor)
    elapsed = time.monotonic() - started

    assert elapsed < TICK_BUDGET_S
    (stored,) = read_alerts(redis_client, settings, "dead_letter_queue_sensor")
    assert stored.details["new"] == 1
    wait_until(lambda: server.attempts >= 1, timeout_s=5)
    if mode == "fail":  # retried with backoff, then given up, URL never logged
        sender = resources["alerts"].webhook()
        assert isinstance(sender, WebhookSender)
        assert sender.flush(timeout_s=10)
        assert server.attempts == 3
        assert sender.stats.failed >= 1
        text = "\n".join(f"{r.getMessage()} {vars(r)}" for r in caplog.records)
        assert "webhook delivery failed" in text
        assert "T0SECRET" not in text and "/hooks/" not in text
