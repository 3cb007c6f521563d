"""The shadow's elastic pool: threads started as jobs need them up to a ceiling, at most
a bound of jobs outstanding, a hand-over that never waits, threads ended on close."""

from __future__ import annotations

import threading
from functools import partial
from operator import contains

import pytest

from sentinel_platform_tests.harness.waits import wait_until
from workers.analyzer.lanes.shadow_pool import ElasticPool, needs_thread


@pytest.mark.parametrize(
    ("waiting", "idle", "threads", "max_threads", "needed"),
    [
        (1, 0, 0, 4, True),  # the first job starts the first thread
        (1, 1, 1, 4, False),  # an idle thread takes it
        (2, 1, 3, 4, True),  # more waiting than idle: one more
        (3, 0, 4, 4, False),  # at the ceiling: the job waits for a thread
        (0, 0, 2, 4, False),
    ],
)
def test_a_thread_starts_only_when_a_job_finds_none_idle(
    waiting: int, idle: int, threads: int, max_threads: int, needed: bool
) -> None:
    assert needs_thread(waiting, idle, threads, max_threads) is needed


class Blocking:
    """Jobs that run until :attr:`release` is set, counted as they start and end."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.lock = threading.Lock()
        self.started: list[int] = []
        self.done: list[int] = []

    def __call__(self, job: int) -> None:
        with self.lock:
            self.started.append(job)
        self.release.wait(10)
        with self.lock:
            self.done.append(job)


def test_a_full_pool_refuses_at_once_and_takes_jobs_again_once_they_end() -> None:
    serve = Blocking()
    pool: ElasticPool[int] = ElasticPool(serve, max_threads=2, bound=3)
    try:
        assert [pool.submit(n) for n in range(5)] == [True, True, True, False, False]
        wait_until(lambda: len(serve.started) == 2, what="two jobs running")
        assert pool.threads == 2, "never beyond the ceiling"
        serve.release.set()
        wait_until(lambda: len(serve.done) == 3, what="the three jobs taken served")
        assert sorted(serve.done) == [0, 1, 2]
        assert pool.submit(5), "slots are given back as jobs end"
        wait_until(lambda: 5 in serve.done, what="the next job served")
    finally:
        serve.release.set()
        assert pool.close(5.0)


def test_threads_start_only_as_jobs_need_them() -> None:
    served: list[int] = []
    pool: ElasticPool[int] = ElasticPool(served.append, max_threads=8, bound=8)
    try:
        for n in range(5):  # one at a time: the one thread is idle for each
            assert pool.submit(n)
            wait_until(partial(contains, served, n), what=f"job {n} served")
        assert pool.threads == 1
    finally:
        assert pool.close(5.0)


def test_a_job_that_raises_costs_no_thread() -> None:
    served: list[int] = []

    def serve(job: int) -> None:
        if job == 0:
            raise RuntimeError("boom")
        served.append(job)

    pool: ElasticPool[int] = ElasticPool(serve, max_threads=1, bound=1)
    try:
        assert pool.submit(0)
        wait_until(lambda: pool.submit(1), what="the slot given back")
        wait_until(lambda: served == [1], what="the next job served on the same thread")
        assert pool.threads == 1
    finally:
        assert pool.close(5.0)


def test_close_waits_until_its_deadline_and_a_stopped_pool_takes_nothing() -> None:
    serve = Blocking()
    stop = threading.Event()
    pool: ElasticPool[int] = ElasticPool(serve, max_threads=2, bound=2, stopped=stop.is_set)
    assert pool.submit(0)
    wait_until(lambda: serve.started == [0], what="a job running")
    stop.set()  # the worker's stop
    assert not pool.submit(1)
    assert not pool.close(0.05), "a job still running outlives the deadline"
    serve.release.set()
    assert pool.close(5.0), "and its thread ends with it"
    assert serve.done == [0]


@pytest.mark.parametrize(("max_threads", "bound"), [(0, 4), (4, 3)])
def test_a_pool_needs_a_thread_and_room_for_each(max_threads: int, bound: int) -> None:
    with pytest.raises(ValueError, match="max_threads"):
        ElasticPool(print, max_threads=max_threads, bound=bound)
