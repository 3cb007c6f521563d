"""A fixed set of daemon threads that run processor calls for one worker.

Slow processors (an analyzer call of seconds) leave a worker idle while it waits; with
``SENTINEL_WORKER_CONCURRENCY`` = C, up to C calls of one worker run at once on these
threads while the consumer loop keeps reading, committing and recovering on its own.

Daemon threads rather than ``concurrent.futures``: a worker asked to stop hands back
the calls that did not finish within its stop timeout and exits; the executor's
threads would be joined at interpreter exit and hold the process until every call
returned. A job is either taken by a thread (then it is *started*) or still queued; the
loop can take the queued ones back (:meth:`WorkPool.take_back_queued`) without racing a
thread, because the queue hands each job to exactly one taker.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from typing import Generic, TypeVar

Job = TypeVar("Job")
Result = TypeVar("Result")


class WorkPool(Generic[Job, Result]):
    """``size`` threads, each running ``call(job)``; ``(job, result)`` pairs come back."""

    def __init__(self, size: int, call: Callable[[Job], Result], name: str = "work") -> None:
        self._call = call
        self._jobs: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._done: queue.SimpleQueue[tuple[Job, Result]] = queue.SimpleQueue()
        self._threads = [
            threading.Thread(target=self._run, name=f"{name}-{n}", daemon=True) for n in range(size)
        ]
        for thread in self._threads:
            thread.start()

    @property
    def size(self) -> int:
        return len(self._threads)

    def submit(self, job: Job) -> None:
        self._jobs.put(job)

    def results(self, wait_s: float = 0.0) -> list[tuple[Job, Result]]:
        """Every finished call; waits up to ``wait_s`` for the first when none is ready."""
        out: list[tuple[Job, Result]] = []
        try:
            out.append(self._done.get(timeout=wait_s) if wait_s > 0 else self._done.get_nowait())
        except queue.Empty:
            return out
        while True:
            try:
                out.append(self._done.get_nowait())
            except queue.Empty:
                return out

    def take_back_queued(self) -> list[Job]:
        """Remove and return the jobs no thread has started yet."""
        taken: list[Job] = []
        while True:
            try:
                job = self._jobs.get_nowait()
            except queue.Empty:
                return taken
            if job is not None:
                taken.append(job)

    def close(self) -> None:
        """Let the threads end once idle (a call in progress is not interrupted)."""
        for _ in self._threads:
            self._jobs.put(None)

    def _run(self) -> None:
        while (job := self._jobs.get()) is not None:
            self._done.put((job, self._call(job)))
