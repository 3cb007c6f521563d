"""A start-up call the worker can stop waiting for: SIGTERM must not wait out a socket.

A Redis call stuck in a socket cannot be interrupted: against a frozen server (it accepts
connections and never answers) or a host that drops packets, one attempt to connect and
check the server lasts the socket timeouts times the client's retries, tens of seconds.
A signal only sets the stop event; the call goes on. So the worker's start-up runs such
an attempt on a thread of its own and waits for it *or* the stop event, whichever comes
first (:func:`until_stopped`). A call given up on is left behind on its daemon thread:
the process is about to exit, which is the only sure way to abandon it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")

#: How often the waiting thread looks at the stop event while the call runs.
STOP_POLL_S = 0.05


class _Call(threading.Thread, Generic[T]):
    """Runs ``call`` once and keeps its result or its exception for the waiting thread."""

    def __init__(self, call: Callable[[], T], name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.call = call
        self.done = threading.Event()
        self.result: T | None = None
        self.error: BaseException | None = None

    def run(self) -> None:
        try:
            self.result = self.call()
        except BaseException as exc:  # handed to the waiting thread, which raises it
            self.error = exc
        finally:
            self.done.set()


def until_stopped(call: Callable[[], T], stop: threading.Event, name: str) -> T | None:
    """``call()``'s result, or None as soon as ``stop`` is set while it runs (the call is
    left behind). An exception of the call is raised here, in the caller's thread."""
    if stop.is_set():
        return None
    running = _Call(call, name)
    running.start()
    while not running.done.wait(STOP_POLL_S):
        if stop.is_set():
            return None
    if running.error is not None:
        raise running.error
    return running.result
