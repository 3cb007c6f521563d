"""The shadow's threads: :class:`ElasticPool`, as many as its jobs need up to a ceiling.

The shadow is asked about messages as fast as the live path decides them, and the live
path's concurrency is found at run time (``SENTINEL_WORKER_CONCURRENCY=auto`` grows it to
what the live model keeps up with), so a fixed handful of threads would fall behind a
fast live path and drop most of the shadow's verdicts. The pool starts a thread only when
a job finds none idle (:func:`needs_thread`), never more than ``max_threads`` (the
worker's concurrency ceiling), and bounds the jobs outstanding (waiting or running) with
a semaphore taken without waiting: a full pool refuses the job at once
(:meth:`ElasticPool.submit` returns False), so whoever hands it over never waits.

Threads are daemons the pool owns (unlike :class:`concurrent.futures.ThreadPoolExecutor`'s,
which the interpreter joins at exit without a deadline, so a worker with a slow call in
flight could not exit until that call's timeout): they end once ``stopped`` says so or
:meth:`ElasticPool.close` is called, an idle one within :data:`POLL_S`, a busy one when its
job returns; ``close`` waits for them until its deadline, and a call still in flight then
ends with the process.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Generic, TypeVar

from sentinel_platform.schemas import describe_error

log = logging.getLogger(__name__)

J = TypeVar("J")

#: How often an idle thread looks at the stop (seconds).
POLL_S = 0.2


def needs_thread(waiting: int, idle: int, threads: int, max_threads: int) -> bool:
    """Whether a job just handed over needs a new thread: more jobs wait than threads are
    idle to take them, and the ceiling allows one more."""
    return waiting > idle and threads < max_threads


class ElasticPool(Generic[J]):
    """Runs ``serve(job)`` for each job handed over, on up to ``max_threads`` threads
    started as needed, with at most ``bound`` jobs outstanding. ``serve`` is expected to
    catch what it raises (an escaping exception is logged and the thread lives on)."""

    def __init__(
        self,
        serve: Callable[[J], None],
        max_threads: int,
        bound: int,
        stopped: Callable[[], bool] = lambda: False,
        name: str = "pool",
    ) -> None:
        if max_threads < 1 or bound < max_threads:
            raise ValueError(f"need 1 <= max_threads <= bound, got {max_threads} and {bound}")
        self._serve, self._max_threads, self._name = serve, max_threads, name
        self._outside_stop = stopped
        self._slots = threading.BoundedSemaphore(bound)
        self._jobs: queue.SimpleQueue[J] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._waiting = 0  # handed over, not yet taken by a thread
        self._idle = 0  # threads not serving a job
        self._threads: list[threading.Thread] = []
        self._stop = threading.Event()

    @property
    def threads(self) -> int:
        """How many threads the pool has started."""
        with self._lock:
            return len(self._threads)

    def stopped(self) -> bool:
        return self._stop.is_set() or self._outside_stop()

    def submit(self, job: J) -> bool:
        """Hand ``job`` to the threads without waiting: False (the job not taken) when
        ``bound`` jobs are outstanding or the pool is stopped."""
        if self.stopped() or not self._slots.acquire(blocking=False):
            return False
        with self._lock:
            self._waiting += 1
            if needs_thread(self._waiting, self._idle, len(self._threads), self._max_threads):
                self._start_thread()
        self._jobs.put(job)
        return True

    def _start_thread(self) -> None:
        """Start one more thread, idle until it takes a job (the lock is held)."""
        thread = threading.Thread(
            target=self._run, name=f"{self._name}-{len(self._threads)}", daemon=True
        )
        self._threads.append(thread)
        self._idle += 1
        thread.start()

    def _run(self) -> None:
        while not self.stopped():
            try:
                job = self._jobs.get(timeout=POLL_S)
            except queue.Empty:
                continue
            with self._lock:
                self._waiting -= 1
                self._idle -= 1
            try:
                self._serve(job)
            except Exception as exc:  # a thread never dies silently: it serves the next
                fields = {"pool": self._name, "error": describe_error(exc)}
                log.warning("pool_job_failed", extra=fields)
            finally:
                self._slots.release()
                with self._lock:
                    self._idle += 1

    def close(self, timeout_s: float) -> bool:
        """Stop the threads and wait for them until ``timeout_s`` has passed; whether all
        ended. Jobs not yet taken are never served."""
        self._stop.set()
        deadline = time.monotonic() + timeout_s
        with self._lock:
            threads = list(self._threads)
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        return not any(thread.is_alive() for thread in threads)
