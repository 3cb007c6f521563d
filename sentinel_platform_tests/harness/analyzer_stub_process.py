"""The harness's :class:`AnalyzerStub` served from a child process of its own.

A hosted model API does not share an interpreter with its callers. A stub that runs in the
test's own process does: under a loaded machine its handler threads wait for the
interpreter lock behind the test's Spark driver, its sensor ticks and its publish thread,
so the analyzer the worker measures is slower than the one the test declared, and a
timing test can fail for the harness's sake. :func:`stub_in_own_process` starts the same
stub in a spawned process and hands back a proxy with the calls a test makes (``url``,
``set_capacity``, ``counters``, ``calls_per_key``); the child is stopped on exit, bounded
by the manager's own shutdown.
"""

from __future__ import annotations

import multiprocessing
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.managers import BaseManager, BaseProxy
from typing import Any

from sentinel_platform_tests.harness.analyzer_stub import AnalyzerStub


class StubProxy(BaseProxy):
    """The calls a test makes on a stub, forwarded to the child process that serves it."""

    _exposed_ = ("stop", "set_capacity", "counters", "calls_per_key", "__getattribute__")

    @property
    def url(self) -> str:
        return str(self._callmethod("__getattribute__", ("url",)))

    def set_capacity(self, capacity: int | None) -> None:
        self._callmethod("set_capacity", (capacity,))

    def counters(self) -> dict[str, Any]:
        return dict(self._callmethod("counters"))

    def calls_per_key(self) -> Counter[str]:
        return Counter(self._callmethod("calls_per_key"))


class _StubManager(BaseManager):
    """Serves :class:`AnalyzerStub` objects in the manager's child process."""


def _started(latency_s: float, **options: Any) -> AnalyzerStub:
    """Runs in the child: a stub, serving (its ``start`` returns what cannot be pickled)."""
    return AnalyzerStub(latency_s, **options).start()


_StubManager.register("AnalyzerStub", _started, proxytype=StubProxy)


@contextmanager
def stub_in_own_process(latency_s: float, **options: Any) -> Iterator[StubProxy]:
    """An :class:`AnalyzerStub` (same arguments) serving from a spawned child process."""
    with _StubManager(ctx=multiprocessing.get_context("spawn")) as manager:
        stub: StubProxy = manager.AnalyzerStub(latency_s, **options)  # type: ignore[attr-defined]
        try:
            yield stub
        finally:
            stub._callmethod("stop")
