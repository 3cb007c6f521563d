"""A model on trial beside the live one: :class:`ShadowAnalyzer`.

The live analyzer decides every message as it would alone. A share of the messages
(``SENTINEL_ANALYZER_SHADOW_FRACTION``, chosen by :func:`chosen` from the natural key, so
a redelivered message is chosen alike) is also handed to the shadow analyzer, off the
message's path: the hand-over is a put into a bounded queue that never waits (a full
queue drops the job and counts it), and a few threads the lane owns ask the shadow and
write its verdict to the shadow result stream
(:func:`~workers.analyzer.lanes.shadow_record.shadow_results_key`). The decision never
waits for the shadow, a shadow's failure (busy, down, exhausted) only drops its verdict,
and a job that waited in the queue longer than the shadow's call timeout is dropped as
stale. The shadow analyzer is built from its own settings, so its hold, rate limit and
token budget are its own and never hold the live model.

The threads start when the worker hands over its Redis client (``bind_redis``) and end
with the worker's stop (``bind_stop``) or :meth:`ShadowAnalyzer.close`. Each verdict
written is counted in the worker's confusion-matrix counter (``bind_metrics``:
``sentinel_worker_verdict_outcomes_total{role="shadow"}``) when its message carries its
truth, as the live verdicts are at commit.
"""

from __future__ import annotations

import hashlib
import logging
import queue
import threading
import time
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from sentinel_platform.schemas import Axiom, Transaction, describe_error
from sentinel_platform.streams.consumer.metrics import Metrics
from sentinel_platform.streams.consumer.processor import Busy
from sentinel_platform.streams.plumbing.keys import StreamKeys
from workers.analyzer.answers.replies import Assessment
from workers.analyzer.apis.model_api import Analyzer
from workers.analyzer.lanes.fallback import PRIMARY, bind_if_any
from workers.analyzer.lanes.shadow_record import (
    SHADOW,
    SHADOW_MAXLEN,
    shadow_entry,
    shadow_results_key,
)

log = logging.getLogger(__name__)

#: Threads asking the shadow, and jobs that may wait for them, per worker.
SHADOW_THREADS = 2
SHADOW_QUEUE = 64
#: How often an idle thread looks at the stop (seconds).
POLL_S = 0.2
#: A drop is logged the first time and then every this many times, per reason.
LOG_EVERY = 100


def chosen(natural_key: str, fraction: float) -> bool:
    """Whether the message of ``natural_key`` is in the shadow's ``fraction`` (0-1): a
    hash of the key read as a number in [0, 1), so the same message is always chosen
    alike, on every worker and on every delivery."""
    if fraction >= 1.0:
        return True
    if fraction <= 0.0:
        return False
    digest = hashlib.sha256(natural_key.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") / 2**64 < fraction


@dataclass(frozen=True)
class Job:
    """A message for the shadow, and when it was queued (monotonic seconds)."""

    message: Transaction | Axiom
    queued_at: float


class ShadowAnalyzer:
    """``live`` decides; ``shadow`` is asked about the ``fraction`` of messages
    :func:`chosen` picks, off the message's path, its verdicts written to the shadow
    result stream. ``deadline_s`` bounds a job's wait in the queue."""

    def __init__(
        self,
        live: Analyzer,
        shadow: Analyzer,
        fraction: float,
        deadline_s: float,
        threads: int = SHADOW_THREADS,
        queue_size: int = SHADOW_QUEUE,
    ) -> None:
        self.live, self.shadow, self.fraction = live, shadow, fraction
        self.deadline_s = deadline_s
        self._count = threads
        self._jobs: queue.Queue[Job] = queue.Queue(queue_size)
        self._stop = threading.Event()
        self._worker_stop: threading.Event | None = None
        self._threads: list[threading.Thread] = []
        self._client: Any = None
        self._key: str | None = None
        self._fields: dict[str, Any] = {}
        self._metrics: Metrics | None = None
        self._lock = threading.Lock()
        #: verdicts written, and jobs dropped by reason (queue_full, late, busy, ...)
        self.written = 0
        self.dropped: Counter[str] = Counter()

    def __repr__(self) -> str:
        return f"ShadowAnalyzer({self.live!r}, shadow={self.shadow!r}, fraction={self.fraction})"

    # --- the live path ------------------------------------------------------------------

    def deciders(self) -> tuple[Analyzer, ...]:
        """The analyzers that may decide through this one: the live one alone."""
        return (self.live,)

    def assess_transaction(self, txn: Transaction) -> Assessment:
        self._offer(txn)
        return self.live.assess_transaction(txn)

    def assess_axiom(self, axiom: Axiom) -> Assessment:
        self._offer(axiom)
        return self.live.assess_axiom(axiom)

    def _offer(self, message: Transaction | Axiom) -> None:
        """Queue ``message`` for the shadow when chosen; never waits."""
        if self._stopped() or not chosen(message.natural_key, self.fraction):
            return
        try:
            self._jobs.put_nowait(Job(message, time.monotonic()))
        except queue.Full:
            self._drop("queue_full", None)

    # --- the shadow's threads -----------------------------------------------------------

    def _stopped(self) -> bool:
        stop = self._worker_stop
        return self._stop.is_set() or (stop is not None and stop.is_set())

    def _start(self) -> None:
        for n in range(self._count):
            thread = threading.Thread(target=self._run, name=f"shadow-{n}", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _run(self) -> None:
        while not self._stopped():
            try:
                job = self._jobs.get(timeout=POLL_S)
            except queue.Empty:
                continue
            self._handle(job)

    def _handle(self, job: Job) -> None:
        """Ask the shadow about ``job`` and write its verdict; drop it if stale or failed."""
        if time.monotonic() - job.queued_at > self.deadline_s:
            self._drop("late", None)
            return
        message = job.message
        try:
            if isinstance(message, Transaction):
                verdict = self.shadow.assess_transaction(message)
            else:
                verdict = self.shadow.assess_axiom(message)
        except Busy as exc:
            self._drop("busy", exc)
            return
        except Exception as exc:  # a shadow's failure costs only its own verdict
            self._drop("failed", exc)
            return
        try:
            entry = shadow_entry(message, verdict)
            self._client.xadd(self._key, entry, maxlen=SHADOW_MAXLEN, approximate=True)
        except Exception as exc:  # the live path has its own Redis errors to meet
            self._drop("write_failed", exc)
            return
        with self._lock:
            self.written += 1
        self._count_outcome(entry)

    def _count_outcome(self, entry: Mapping[str, str]) -> None:
        """Count a written verdict in the worker's outcome counter, when bound; a metric
        never costs the verdict."""
        if self._metrics is None:
            return
        try:
            self._metrics.outcomes.count(entry)
        except Exception as exc:  # the thread lives on: it serves the next job
            log.warning("shadow_count_failed", extra={**self._fields, "error": describe_error(exc)})

    def _drop(self, reason: str, exc: BaseException | None) -> None:
        with self._lock:
            self.dropped[reason] += 1
            times = self.dropped[reason]
        if self._metrics is not None:
            self._metrics.analyzers.count_shadow_drop(reason)
        if times == 1 or times % LOG_EVERY == 0:
            error = describe_error(exc) if exc is not None else None
            fields = {**self._fields, "reason": reason, "dropped": times, "error": error}
            log.warning("shadow_dropped", extra=fields)

    # --- the worker's binds -------------------------------------------------------------

    def bind_keys(self, keys: StreamKeys) -> None:
        """The worker's stream: its shadow verdicts go to that stream's shadow stream."""
        self._key = shadow_results_key(keys)
        bind_if_any(self.live, "bind_keys", keys)

    def bind_log_fields(self, fields: Mapping[str, Any]) -> None:
        self._fields = {**fields, "analyzer_role": SHADOW}
        bind_if_any(self.live, "bind_log_fields", fields)
        bind_if_any(self.shadow, "bind_log_fields", self._fields)

    def bind_metrics(self, metrics: Metrics, role: str = PRIMARY) -> None:
        """The live analyzer counts under ``role``, the shadow under ``shadow``, and the
        jobs dropped count in ``shadow_dropped`` (every reason at 0 from now); the shadow's
        verdicts are counted in the outcome counter with ``role=shadow``."""
        bind_if_any(self.live, "bind_metrics", metrics, role)
        bind_if_any(self.shadow, "bind_metrics", metrics, SHADOW)
        metrics.analyzers.shadow_drops()
        self._metrics = metrics

    def bind_redis(self, client: Any) -> None:
        """Share both analyzers' limits through ``client`` and start the shadow's threads,
        which write with it."""
        bind_if_any(self.live, "bind_redis", client)
        bind_if_any(self.shadow, "bind_redis", client)
        self._client = client
        if self._key is not None and not self._threads:
            self._start()

    def bind_stop(self, stop: threading.Event) -> None:
        self._worker_stop = stop
        bind_if_any(self.live, "bind_stop", stop)
        bind_if_any(self.shadow, "bind_stop", stop)

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop the shadow's threads (a call in flight ends within its own timeout) and
        close both analyzers."""
        self._stop.set()
        deadline = time.monotonic() + timeout_s
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        bind_if_any(self.live, "close")
        bind_if_any(self.shadow, "close")
