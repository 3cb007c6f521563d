"""The heartbeat's side writes (the lag key, the peaks, the holding, the claims): run
beside the lease refresh, never before it, and never able to hold it up.

A side write that fails is logged, not raised (:class:`SideWriteFailures`: the first of
a streak, a changed error, then once a minute), because nothing waits for it; a failure
that means Redis is unreachable also tells the recovery grace (leases may expire while
the server is away).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from sentinel_platform.logs import BoundLogger
from sentinel_platform.streams.plumbing.connection import FAILOVER_ERRORS, TRANSIENT_ERRORS

log = logging.getLogger(__name__)


class SideWriteFailures:
    """Logs failed side writes: the first of a streak, a changed error, then once a minute;
    and ``side_write_recovered`` when one succeeds again. Any thread may report."""

    #: Between two lines about the same failing write and error.
    REPEAT_S = 60.0

    def __init__(self, log_fields: dict[str, str]) -> None:
        self.log = BoundLogger(log, log_fields)
        self._lock = threading.Lock()
        self._last: dict[str, tuple[str, float, int]] = {}  # write -> (error, logged at, since)

    def failed(self, write: str, exc: Exception) -> None:
        error, now = str(exc), time.monotonic()
        with self._lock:
            last_error, logged_at, since = self._last.get(write, ("", 0.0, 0))
            repeats = since + 1
            quiet = last_error == error and now - logged_at < self.REPEAT_S
            self._last[write] = (last_error, logged_at, repeats) if quiet else (error, now, 0)
        if not quiet:
            self.log.warning(
                "side_write_failed",
                extra={"write": write, "error": error, "repeats": repeats},
            )

    def succeeded(self, write: str) -> None:
        with self._lock:
            streak = self._last.pop(write, None)
        if streak is not None:
            self.log.info("side_write_recovered", extra={"write": write})


class SideWrites(threading.Thread):
    """Runs the heartbeat's side writes on its period, beside it: never before a refresh."""

    def __init__(
        self,
        write: Callable[[], object],
        interval_s: float,
        halt: threading.Event,
        failures: SideWriteFailures,
        on_unreachable: Callable[[], None] | None = None,
        name: str = "lag",
    ) -> None:
        super().__init__(name="heartbeat-side-writes", daemon=True)
        self.write = write
        self.interval_s = interval_s
        self._halt = halt
        self.failures = failures
        self.on_unreachable = on_unreachable
        self.write_name = name

    def run(self) -> None:
        while not self._halt.wait(self.interval_s):
            self.once()

    def once(self) -> None:
        try:
            self.write()
        except Exception as exc:  # logged, never raised: nothing waits for a side write
            unreachable = isinstance(exc, (*TRANSIENT_ERRORS, *FAILOVER_ERRORS))
            if unreachable and self.on_unreachable is not None:
                self.on_unreachable()  # leases may expire meanwhile: see recovery_grace.py
            self.failures.failed(self.write_name, exc)
        else:
            self.failures.succeeded(self.write_name)
