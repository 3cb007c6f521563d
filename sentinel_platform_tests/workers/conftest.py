"""Worker-process fixtures, shared by the worker, benchmark, cluster and CLI tests.

``start_worker(...)`` launches a real ``python -m sentinel_platform.workers <stream>``
process with the test settings in its environment (plus short recovery timings, see
``FAST_TIMINGS``), captures its JSON log lines, and SIGKILLs whatever is left at the end
of the test. ``WorkerProcess.wait_ready()`` waits for its ``started`` line and its lease.

Other test areas reuse them by importing the fixtures into their own conftest.py::

    from sentinel_platform_tests.workers.conftest import start_worker, worker_env  # noqa: F401

The machinery itself (no pytest) is in ``sentinel_platform_tests/harness/processes.py``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path

import pytest

from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.keys import StreamKeys, transaction_keys
from sentinel_platform_tests.harness.processes import (
    FAST_TIMINGS,
    NOOP_PROCESSOR,
    TEST_PROCESSOR,
    WorkerProcess,
    launch_worker,
)
from sentinel_platform_tests.harness.streams import pending_of, publish

__all__ = [
    "FAST_TIMINGS",
    "NOOP_PROCESSOR",
    "TEST_PROCESSOR",
    "StartWorker",
    "WorkerProcess",
    "pending_of",
    "publish",
    "start_worker",
    "tx_keys",
    "worker_env",
]

StartWorker = Callable[..., WorkerProcess]


@pytest.fixture
def worker_env(settings_env: dict[str, str]) -> dict[str, str]:
    """Environment for worker processes: the test server plus ``FAST_TIMINGS``."""
    return {**settings_env, **FAST_TIMINGS}


@pytest.fixture
def start_worker(worker_env: dict[str, str], tmp_path: Path) -> Iterator[StartWorker]:
    """Factory: ``start_worker(stream="transactions", consumer=None, processor=TEST_PROCESSOR,
    env=None, args=())`` -> :class:`WorkerProcess`. ``processor=None`` keeps the entry
    point's default (the domain processor); ``env`` adds or overrides variables."""
    started: list[WorkerProcess] = []

    def start(
        stream: str = "transactions",
        consumer: str | None = None,
        processor: str | None = TEST_PROCESSOR,
        env: Mapping[str, str] | None = None,
        args: Sequence[str] = (),
    ) -> WorkerProcess:
        full_env = {**worker_env, **(env or {})}
        worker = launch_worker(full_env, tmp_path, stream, consumer, processor, args)
        started.append(worker)
        return worker

    yield start
    for worker in started:
        worker.kill()


@pytest.fixture
def tx_keys(settings: Settings) -> StreamKeys:
    return transaction_keys(settings)
