"""Slack-compatible webhook delivery that can never hold up a sensor tick.

Alerts are handed to a bounded queue served by one daemon thread per webhook URL and
process; the caller returns at once. The thread posts ``{"text": ...}`` with a timeout
through one pooled urllib3 connection pool, whose ``Retry`` retries transient failures
(connection errors, timeouts, 429, 5xx) with exponential backoff and, when the endpoint
sends ``Retry-After`` (rate limits), waits exactly that long instead (capped, so one
endpoint cannot stall the queue for hours). If the queue is full the alert is dropped
from the webhook only: the Redis alert stream, written first, still has it. The URL is a
secret: it lives in a ``SecretStr`` and no log line or exception message here contains it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import queue
import threading
import time
from dataclasses import dataclass, field

import urllib3
from pydantic import SecretStr
from urllib3.util.retry import Retry

from sentinel_platform.alerting.model import Alert

log = logging.getLogger(__name__)

#: Attempts per alert, the first one included.
DEFAULT_RETRIES = 3
DEFAULT_BACKOFF_S = 0.5
BACKOFF_CAP_S = 10.0
#: Longest ``Retry-After`` honoured; a longer one is shortened to this.
RETRY_AFTER_CAP_S = 60
DEFAULT_QUEUE_SIZE = 1000
TRANSIENT_STATUSES = frozenset({429, 500, 502, 503, 504})


class _DeliveryFailed(Exception):
    """Given up: a permanent rejection (4xx other than 429) or retries exhausted."""


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
        self._max_attempts = max(retries, 1)
        _hide_in_library_logs(url.get_secret_value())
        self._pool = urllib3.PoolManager(
            timeout=urllib3.Timeout(connect=timeout_s, read=timeout_s),
            retries=_retry_policy(retries, backoff_s),
        )
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
        try:
            attempts = self._post(slack_payload(alert))
        except _DeliveryFailed as exc:
            attempts, reason = exc.args
            self._count_attempts(attempts)
            self._give_up(alert, attempts, reason)
            return
        self._count_attempts(attempts)
        self.stats.bump("delivered")

    def _count_attempts(self, attempts: int) -> None:
        for _ in range(attempts):
            self.stats.bump("attempts")

    def _give_up(self, alert: Alert, attempts: int, reason: str) -> None:
        self.stats.bump("failed")
        log.error(
            "alert webhook delivery failed; the alert remains in the Redis alert stream",
            extra={"fingerprint": alert.fingerprint, "attempts": attempts, "error": reason},
        )

    def _post(self, body: bytes) -> int:
        """POST with the pool's retries; the number of attempts it took. Raises
        :class:`_DeliveryFailed` with (attempts, reason) when the alert cannot be sent."""
        try:
            response = self._pool.request(
                "POST",
                self._url.get_secret_value(),
                body=body,
                headers={"Content-Type": "application/json"},
            )
        except urllib3.exceptions.MaxRetryError as exc:  # connection errors every time
            raise _DeliveryFailed(self._max_attempts, _describe(exc)) from None
        except urllib3.exceptions.HTTPError as exc:
            raise _DeliveryFailed(1, _describe(exc)) from None
        attempts = _attempts(response.retries)
        if not 200 <= response.status < 300:
            raise _DeliveryFailed(attempts, f"HTTP {response.status}")
        return attempts


def _retry_policy(attempts: int, backoff_s: float) -> Retry:
    """``attempts`` tries in all; ``Retry-After`` wins over the exponential backoff."""
    return Retry(
        total=max(attempts - 1, 0),
        allowed_methods=None,  # POST too: a duplicate alert beats a lost one
        status_forcelist=TRANSIENT_STATUSES,
        backoff_factor=backoff_s,
        backoff_max=BACKOFF_CAP_S,
        respect_retry_after_header=True,
        retry_after_max=RETRY_AFTER_CAP_S,
        raise_on_status=False,
        raise_on_redirect=False,
    )


class _HideSecrets(logging.Filter):
    """urllib3 logs the request path on retries (``Retry: /hooks/T0.../B0...``); a webhook
    path is a credential, so it is replaced before any handler sees the record."""

    def __init__(self) -> None:
        super().__init__()
        self.secrets: set[str] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if any(secret in message for secret in self.secrets):
            for secret in self.secrets:
                message = message.replace(secret, "***")
            record.msg, record.args = message, ()
        return True


_LIBRARY_FILTER = _HideSecrets()
_LIBRARY_LOGGERS = ("urllib3.connectionpool", "urllib3.util.retry", "urllib3.poolmanager")


def _hide_in_library_logs(url: str) -> None:
    parts = urllib3.util.parse_url(url)
    _LIBRARY_FILTER.secrets.update(filter(None, (url, parts.request_uri, parts.auth)))
    _LIBRARY_FILTER.secrets.discard("/")
    for name in _LIBRARY_LOGGERS:
        library_log = logging.getLogger(name)
        if _LIBRARY_FILTER not in library_log.filters:
            library_log.addFilter(_LIBRARY_FILTER)


def _attempts(retries: Retry | None) -> int:
    return 1 + len(retries.history) if retries is not None else 1


def _describe(exc: BaseException) -> str:
    """A reason without the URL: the underlying error's type only."""
    reason = getattr(exc, "reason", None)
    return type(reason).__name__ if isinstance(reason, BaseException) else type(exc).__name__


_SENDERS: dict[str, WebhookSender] = {}
_SENDERS_LOCK = threading.Lock()


def shared_sender(
    url: SecretStr,
    timeout_s: float,
    *,
    retries: int = DEFAULT_RETRIES,
    backoff_s: float = DEFAULT_BACKOFF_S,
    queue_size: int = DEFAULT_QUEUE_SIZE,
) -> WebhookSender:
    """The process-wide sender for ``url`` (resources are rebuilt every tick; threads are not)."""
    digest = hashlib.sha256(f"{url.get_secret_value()}|{timeout_s}".encode()).hexdigest()
    with _SENDERS_LOCK:
        sender = _SENDERS.get(digest)
        if sender is None:
            sender = WebhookSender(url, timeout_s, retries, backoff_s, queue_size)
            _SENDERS[digest] = sender
        return sender
