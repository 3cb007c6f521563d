"""Webhook delivery against a real local HTTP server: a rate-limited endpoint (HTTP 429)
is retried when its ``Retry-After`` says so, and the bounded queue still drops instead of
blocking."""

from __future__ import annotations

import itertools
import logging
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from pydantic import SecretStr

from sentinel_platform.alerting.model import Alert
from sentinel_platform.alerting.webhook import WebhookSender
from sentinel_platform.redis_server import free_port
from sentinel_platform_tests.harness.waits import wait_until


class RateLimitedEndpoint:
    """Answers 429 with ``Retry-After`` to the first ``limited`` posts, then 200; or holds
    every request until released (``hang``)."""

    def __init__(self, limited: int = 0, retry_after_s: int = 2, hang: bool = False) -> None:
        self.limited, self.retry_after_s, self.hang = limited, retry_after_s, hang
        self.arrivals: list[float] = []
        self.release = threading.Event()
        endpoint = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("Content-Length", 0)))
                endpoint.arrivals.append(time.monotonic())
                if endpoint.hang:
                    endpoint.release.wait(30)
                if len(endpoint.arrivals) <= endpoint.limited:
                    self.send_response(429)
                    self.send_header("Retry-After", str(endpoint.retry_after_s))
                else:
                    self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> SecretStr:
        return SecretStr(f"http://127.0.0.1:{self.httpd.server_address[1]}/hooks/T0SECRET/B0")

    def close(self) -> None:
        self.release.set()
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def endpoints() -> Iterator[list[RateLimitedEndpoint]]:
    started: list[RateLimitedEndpoint] = []
    yield started
    for endpoint in started:
        endpoint.close()


def _alert(n: int = 0) -> Alert:
    return Alert(source="test", condition=f"rate-limit-{n}", severity="warning", summary="lag high")


def test_a_429_is_retried_after_its_retry_after_and_delivered(
    endpoints: list[RateLimitedEndpoint], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    endpoint = RateLimitedEndpoint(limited=2, retry_after_s=2)
    endpoints.append(endpoint)
    sender = WebhookSender(endpoint.url, timeout_s=5, backoff_s=0.05)
    try:
        assert sender.submit(_alert())
        assert sender.flush(timeout_s=20)
    finally:
        sender.close()
    assert sender.stats.delivered == 1 and sender.stats.failed == 0
    assert len(endpoint.arrivals) == 3
    gaps = [b - a for a, b in itertools.pairwise(endpoint.arrivals)]
    assert all(gap >= 1.9 for gap in gaps), f"retried before Retry-After elapsed: {gaps}"
    assert "T0SECRET" not in caplog.text


def test_an_unreachable_endpoint_is_given_up_without_logging_its_url(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG)
    url = SecretStr(f"http://127.0.0.1:{free_port()}/hooks/T0SECRET/B0TOKEN")
    sender = WebhookSender(url, timeout_s=1, retries=3, backoff_s=0.01)
    try:
        assert sender.submit(_alert())
        assert sender.flush(timeout_s=20)
    finally:
        sender.close()
    assert (sender.stats.failed, sender.stats.delivered, sender.stats.attempts) == (1, 0, 3)
    assert "webhook delivery failed" in caplog.text
    assert "T0SECRET" not in caplog.text and "B0TOKEN" not in caplog.text


def test_a_full_queue_drops_alerts_without_blocking_the_caller(
    endpoints: list[RateLimitedEndpoint],
) -> None:
    endpoint = RateLimitedEndpoint(hang=True)
    endpoints.append(endpoint)
    sender = WebhookSender(endpoint.url, timeout_s=10, queue_size=2)
    try:
        assert sender.submit(_alert(0))
        wait_until(lambda: endpoint.arrivals, timeout_s=10)  # the first one is in flight
        started = time.monotonic()
        accepted = [sender.submit(_alert(n)) for n in range(1, 5)]
        assert time.monotonic() - started < 2.0  # a blocking submit would wait for the hung post
        assert accepted == [True, True, False, False]
        assert sender.stats.dropped == 2
        endpoint.release.set()
        assert sender.flush(timeout_s=20)
        assert sender.stats.delivered == 3
    finally:
        sender.close()
