"""Slack-compatible webhook delivery that can never hold up a sensor tick.

Alerts are handed to a bounded queue served by one daemon thread per webhook URL and
process; the caller returns at once. The thread posts ``{"text": ...}`` with a timeout
and retries transient failures (connection errors, timeouts, 429, 5xx) with exponential
backoff. If the queue is full the alert is dropped from the webhook only: the Redis
alert stream, written first, still has it. The URL is a secret: it lives in a
``SecretStr`` and no log line or exception message here contains it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import queue
import threading
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field

from pydantic import SecretStr

from sentinel_platform.alerting.model import Alert

log = logging.getLogger(__name__)

DEFAULT_RETRIES = 3
DEFAULT_BACKOFF_S = 0.5
BACKOFF_CAP_S = 10.0
DEFAULT_QUEUE_SIZE = 1000


class _PermanentFailure(Exception):
    """The endpoint rejected the payload (4xx other than 429): retrying cannot help."""


def slack_payload(alert: Alert) -> bytes:
    return json.dumps({"text": alert.text()}).encode()


@dataclass
class WebhookStats:
    """Counters for tests and diagnostics (never the URL)."""

    delivered: int = 0
    failed: int = 0
    dropped: int = 0
    attempts: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def bump(self, name: str) -> None:
        with self.lock:
            setattr(self, name, getattr(self, name) + 1)


class WebhookSender:
    """One background delivery thread for one webhook URL."""

    def __init__(
        self,
        url: SecretStr,
        timeout_s: float,
        retries: int = DEFAULT_RETRIES,
        backoff_s: float = DEFAULT_BACKOFF_S,
        queue_size: int = DEFAULT_QUEUE_SIZE,
    ) -> None:
        self._url = url
        self._timeout_s = timeout_s
        self._retries = retries
        self._backoff_s = backoff_s
        self._queue: queue.Queue[Alert | None] = queue.Queue(maxsize=queue_size)
        self._stopping = threading.Event()
        self.stats = WebhookStats()
        self._thread = threading.Thread(target=self._serve, name="alert-webhook", daemon=True)
        self._thread.start()

    def submit(self, alert: Alert) -> bool:
        """Queue the alert without blocking; False when the queue is full (alert dropped)."""
        try:
            self._queue.put_nowait(alert)
        except queue.Full:
            self.stats.bump("dropped")
            log.warning(
                "alert webhook queue full, alert not sent to webhook",
                extra={"fingerprint": alert.fingerprint},
            )
            return False
        return True

    def flush(self, timeout_s: float) -> bool:
        """Wait until every queued alert was delivered or given up; True if drained in time."""
        deadline = time.monotonic() + timeout_s
        while self._queue.unfinished_tasks:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.01)
        return True

    def close(self) -> None:
        self._stopping.set()
        with contextlib.suppress(queue.Full):
            self._queue.put_nowait(None)

    def _serve(self) -> None:
        while True:
            alert = self._queue.get()
            try:
                if alert is None:
                    return
                self._deliver(alert)
            finally:
                self._queue.task_done()

    def _deliver(self, alert: Alert) -> None:
        body = slack_payload(alert)
        for attempt in range(1, self._retries + 1):
            self.stats.bump("attempts")
            try:
                self._post(body)
            except _PermanentFailure as exc:
                self._give_up(alert, attempt, str(exc))
                return
            except (urllib.error.URLError, TimeoutError, OSError) as exc:
                reason = _describe(exc)
                log.warning(
                    "alert webhook attempt failed",
                    extra={"fingerprint": alert.fingerprint, "attempt": attempt, "error": reason},
                )
                if attempt == self._retries or self._stopping.is_set():
                    self._give_up(alert, attempt, reason)
                    return
                time.sleep(min(self._backoff_s * 2 ** (attempt - 1), BACKOFF_CAP_S))
            else:
                self.stats.bump("delivered")
                return

    def _give_up(self, alert: Alert, attempts: int, reason: str) -> None:
        self.stats.bump("failed")
        log.error(
            "alert webhook delivery failed; the alert remains in the Redis alert stream",
            extra={"fingerprint": alert.fingerprint, "attempts": attempts, "error": reason},
        )

    def _post(self, body: bytes) -> None:
        request = urllib.request.Request(
            self._url.get_secret_value(),
            data=body,
            headers={"Content-Type": "application/json"},
            method="POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self._timeout_s) as response:
                response.read()
        except urllib.error.HTTPError as exc:
            if exc.code == 429 or exc.code >= 500:
                raise
            raise _PermanentFailure(f"HTTP {exc.code}") from None


def _describe(exc: BaseException) -> str:
    """A reason without the URL: HTTP status or exception type only."""
    if isinstance(exc, urllib.error.HTTPError):
        return f"HTTP {exc.code}"
    if isinstance(exc, urllib.error.URLError) and isinstance(exc.reason, BaseException):
        return type(exc.reason).__name__
    return type(exc).__name__


_SENDERS: dict[str, WebhookSender] = {}
_SENDERS_LOCK = threading.Lock()


def shared_sender(url: SecretStr, timeout_s: float, **kwargs: float) -> WebhookSender:
    """The process-wide sender for ``url`` (resources are rebuilt every tick; threads are not)."""
    digest = hashlib.sha256(f"{url.get_secret_value()}|{timeout_s}".encode()).hexdigest()
    with _SENDERS_LOCK:
        sender = _SENDERS.get(digest)
        if sender is None:
            sender = WebhookSender(url, timeout_s, **kwargs)  # type: ignore[arg-type]
            _SENDERS[digest] = sender
        return sender
