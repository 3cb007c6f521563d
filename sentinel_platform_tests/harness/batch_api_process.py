"""A provider's two lanes served from processes of their own: the real-time calls by one
:class:`BatchApiServer`, the batch API by another behind it (``batches_at``).

A hosted provider neither shares an interpreter nor a machine's cores with its callers. A
stand-in in the measuring process does both: parsing a batch upload of tens of megabytes
holds its interpreter lock for seconds, and every real-time answer waits behind it, so a
measurement of the live stream beside a backfill would time the stand-in. Here the
real-time answers come from a process that does nothing else, and the batch API's process
runs at the lowest CPU priority (``os.nice``), standing for work done on the provider's
machines. Each child is a manager's (:mod:`multiprocessing.managers`, spawned), stopped on
leaving the block, bounded by the manager's own shutdown.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from multiprocessing.managers import BaseManager, BaseProxy
from typing import Any

from sentinel_platform_tests.harness.batch_api_server import BatchApiServer, serving_batch_api

#: The batch API's niceness (the lowest priority): the provider's work is not ours.
BATCH_NICENESS = 19


class ServerProxy(BaseProxy):
    """The calls a benchmark makes on a :class:`BatchApiServer` in another process."""

    _exposed_ = ("stop", "counts", "__getattribute__")

    @property
    def url(self) -> str:
        return str(self._callmethod("__getattribute__", ("url",)))

    def counts(self) -> dict[str, int]:
        return dict(self._callmethod("counts"))


@dataclass
class _Served:
    """A serving :class:`BatchApiServer` and the stack that stops it."""

    state: BatchApiServer
    stack: ExitStack

    @property
    def url(self) -> str:
        return self.state.url

    def counts(self) -> dict[str, int]:
        """Requests seen, batches created, real-time calls answered."""
        return {
            "requests": len(self.state.seen()),
            "submissions": self.state.submissions(),
            "realtime_calls": self.state.realtime_calls(),
        }

    def stop(self) -> None:
        self.stack.close()


def _started(niceness: int = 0, **options: Any) -> _Served:
    """Runs in the child: a server with ``options`` set, serving."""
    if niceness:
        os.nice(niceness)
    stack = ExitStack()
    state = stack.enter_context(serving_batch_api())
    for name, value in options.items():
        setattr(state, name, value)
    return _Served(state, stack)


class _Manager(BaseManager):
    """Serves one :class:`BatchApiServer` in the manager's child process."""


_Manager.register("Server", _started, proxytype=ServerProxy)


@contextmanager
def _server_apart(**options: Any) -> Iterator[ServerProxy]:
    with _Manager(ctx=multiprocessing.get_context("spawn")) as manager:
        server: ServerProxy = manager.Server(**options)  # type: ignore[attr-defined]
        try:
            yield server
        finally:
            server._callmethod("stop")


@contextmanager
def provider_apart(realtime_latency_s: float, **batch_options: Any) -> Iterator[tuple[
        ServerProxy, ServerProxy]]:  # fmt: skip
    """``(front, batches)``: point a worker at ``front.url``; ``front`` answers real-time
    calls after ``realtime_latency_s`` and forwards the rest to ``batches`` (a server with
    ``batch_options`` set, e.g. ``polls_to_end``)."""
    with ExitStack() as stack:
        batches = stack.enter_context(_server_apart(niceness=BATCH_NICENESS, **batch_options))
        front = stack.enter_context(
            _server_apart(realtime_latency_s=realtime_latency_s, batches_at=batches.url)
        )
        yield front, batches
