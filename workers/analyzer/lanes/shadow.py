"""A model on trial beside the live one: :class:`ShadowAnalyzer`.

The live analyzer decides every message as it would alone. A share of the messages
(``SENTINEL_ANALYZER_SHADOW_FRACTION``, chosen by :func:`chosen` from the natural key, so
a redelivered message is chosen alike) is also handed to the shadow analyzer, off the
message's path, once the live call has returned or failed (a live call answered busy,
:class:`~sentinel_platform.streams.consumer.processor.Busy`, is made again later, so the
message is handed over then, and the shadow asked once). The hand-over never waits: an
:class:`~workers.analyzer.lanes.shadow_pool.ElasticPool` the lane owns asks the shadow on
as many threads as the jobs need, up to the worker's concurrency ceiling, as the live
calls run (a fixed few would fall behind a live path that runs dozens at once), with at
most that many plus :data:`SHADOW_QUEUE` jobs outstanding (a full pool drops the job and
counts it), and writes each verdict to the shadow result stream
(:func:`~workers.analyzer.lanes.shadow_record.shadow_results_key`). The decision never
waits for the shadow, a shadow's failure (busy, down, exhausted) only drops its verdict
(a short turn handed back before the call was sent is taken again: :func:`turn_wait`),
and a job that waited longer than the shadow's call timeout is dropped as stale. The
shadow analyzer is built from its own settings, so its hold, rate limit and token budget
are its own and never hold the live model.

The pool opens when the worker hands over its Redis client (``bind_redis``) and ends
with the worker's stop (``bind_stop``) or :meth:`ShadowAnalyzer.close`. Each verdict
written is counted in the worker's confusion-matrix counter (``bind_metrics``:
``sentinel_worker_verdict_outcomes_total{role="shadow"}``) when its message carries its
truth, as the live verdicts are at commit.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from sentinel_platform.schemas import Axiom, Transaction, describe_error
from sentinel_platform.streams.consumer.metrics import Metrics
from sentinel_platform.streams.consumer.processor import Busy
from sentinel_platform.streams.plumbing.keys import StreamKeys
from workers.analyzer.answers.replies import Assessment
from workers.analyzer.apis.model_api import Analyzer
from workers.analyzer.lanes.fallback import PRIMARY, bind_if_any
from workers.analyzer.lanes.shadow_pool import ElasticPool
from workers.analyzer.lanes.shadow_record import (
    SHADOW,
    SHADOW_MAXLEN,
    shadow_entry,
    shadow_results_key,
)

log = logging.getLogger(__name__)

#: Jobs that may wait for the shadow beyond those its threads are serving, per worker.
SHADOW_QUEUE = 64
#: The longest turn (a busy call not sent) a shadow call waits for before its next try,
#: and the wait for a turn that named none (seconds).
TURN_MAX_S = 1.0
GATE_TURN_S = 0.1
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


M = TypeVar("M", Transaction, Axiom)


def turn_wait(sent: bool, retry_after_s: float | None, left_s: float) -> float | None:
    """How long to wait before asking the shadow again after it answered busy, or None to
    drop the verdict. Only a turn is waited for: a call not sent (``sent`` False) whose
    retry is at most :data:`TURN_MAX_S` (``GATE_TURN_S`` when not given) and ends within
    the ``left_s`` the job has before it is stale. A shadow that refused a call itself, or
    is held for longer, costs its verdict: its threads never queue behind its holds."""
    wait_s = GATE_TURN_S if retry_after_s is None else max(0.0, retry_after_s)
    if sent or wait_s > TURN_MAX_S or wait_s >= left_s:
        return None
    return wait_s


@dataclass(frozen=True)
class Job:
    """A message for the shadow, and when it was queued (monotonic seconds)."""

    message: Transaction | Axiom
    queued_at: float


class ShadowAnalyzer:
    """``live`` decides; ``shadow`` is asked about the ``fraction`` of messages
    :func:`chosen` picks, off the message's path, its verdicts written to the shadow
    result stream. ``deadline_s`` bounds a job's wait for a thread; ``threads`` is the
    most calls to the shadow at once (the worker's concurrency ceiling), ``queue_size``
    the jobs that may wait beyond them."""

    def __init__(
        self,
        live: Analyzer,
        shadow: Analyzer,
        fraction: float,
        deadline_s: float,
        threads: int = 1,
        queue_size: int = SHADOW_QUEUE,
    ) -> None:
        self.live, self.shadow, self.fraction = live, shadow, fraction
        self.deadline_s = deadline_s
        self._stop = threading.Event()
        self._worker_stop: threading.Event | None = None
        self._pool: ElasticPool[Job] = ElasticPool(
            self._handle, threads, threads + queue_size, self._stopped, name="shadow"
        )
        self._open = False  # jobs are taken once the Redis client is bound
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
        return self._decide(txn, self.live.assess_transaction)

    def assess_axiom(self, axiom: Axiom) -> Assessment:
        return self._decide(axiom, self.live.assess_axiom)

    def _decide(self, message: M, ask: Callable[[M], Assessment]) -> Assessment:
        """The live verdict of ``message``; the shadow is offered it once the live call
        has returned or failed, never when it answered busy (the message is called again
        later, and offered then)."""
        try:
            verdict = ask(message)
        except Busy:
            raise
        except Exception:
            self._offer(message)
            raise
        self._offer(message)
        return verdict

    def _offer(self, message: Transaction | Axiom) -> None:
        """Hand ``message`` to the shadow's pool when chosen; never waits."""
        if self._stopped() or not chosen(message.natural_key, self.fraction):
            return
        if not self._open or not self._pool.submit(Job(message, time.monotonic())):
            self._drop("queue_full", None)

    # --- the shadow's threads -----------------------------------------------------------

    def _stopped(self) -> bool:
        stop = self._worker_stop
        return self._stop.is_set() or (stop is not None and stop.is_set())

    def _handle(self, job: Job) -> None:
        """Ask the shadow about ``job`` and write its verdict; drop it if stale or failed."""
        verdict = self._ask(job)
        if verdict is None:
            return
        message = job.message
        try:
            entry = shadow_entry(message, verdict)
            self._client.xadd(self._key, entry, maxlen=SHADOW_MAXLEN, approximate=True)
        except Exception as exc:  # the live path has its own Redis errors to meet
            self._drop("write_failed", exc)
            return
        with self._lock:
            self.written += 1
        self._count_outcome(entry)

    def _ask(self, job: Job) -> Assessment | None:
        """The shadow's verdict on ``job``'s message, or None when dropped (stale, busy,
        failed). A turn handed back before the call was sent (the fleet's first call out,
        no rate slot yet: :func:`turn_wait`) is taken again after its short wait, as the
        live path takes its turns, so a burst of shadow calls is not a burst of drops."""
        while True:
            age_s = time.monotonic() - job.queued_at
            if age_s > self.deadline_s:
                self._drop("late", None)
                return None
            try:
                if isinstance(job.message, Transaction):
                    return self.shadow.assess_transaction(job.message)
                return self.shadow.assess_axiom(job.message)
            except Busy as exc:
                wait_s = turn_wait(exc.sent, exc.retry_after_s, self.deadline_s - age_s)
                if wait_s is None or self._stop.wait(wait_s) or self._stopped():
                    self._drop("busy", exc)
                    return None
            except Exception as exc:  # a shadow's failure costs only its own verdict
                self._drop("failed", exc)
                return None

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
        """Share both analyzers' limits through ``client`` and open the shadow's pool,
        whose threads write with it."""
        bind_if_any(self.live, "bind_redis", client)
        bind_if_any(self.shadow, "bind_redis", client)
        self._client = client
        self._open = self._key is not None

    def bind_stop(self, stop: threading.Event) -> None:
        self._worker_stop = stop
        bind_if_any(self.live, "bind_stop", stop)
        bind_if_any(self.shadow, "bind_stop", stop)

    def close(self, timeout_s: float = 5.0) -> None:
        """Stop the shadow's threads (a call in flight ends within its own timeout) and
        close both analyzers."""
        self._stop.set()
        self._pool.close(timeout_s)
        bind_if_any(self.live, "close")
        bind_if_any(self.shadow, "close")
