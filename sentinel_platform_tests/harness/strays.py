"""Killing a fleet's processes and what they started, so nothing of a test outlives it.

A worker with a batch lane starts ``python -m workers.batchlane`` as its child; SIGKILL
on the worker leaves that child running until it notices (it exits by itself, but
finishing its step may record a batch in Redis). A test's teardown that killed only the
worker would let the lane write into the next test's flushed server.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

import psutil

from sentinel_platform.cli.proctree import descendants, identify, kill_all, still_running
from sentinel_platform_tests.harness.waits import wait_until

#: How long a kill waits for the processes to be gone.
GONE_WAIT_S = 10.0


class Killable(Protocol):
    @property
    def pid(self) -> int: ...

    def alive(self) -> bool: ...

    def kill(self) -> None: ...


def lane_processes(parents: set[int]) -> set[int]:
    """The batch lane processes (``python -m workers.batchlane ... --parent-pid P``) whose
    worker is one of ``parents``, whether or not that worker is still alive."""
    found = set()
    for process in psutil.process_iter(["cmdline"]):
        line = process.info.get("cmdline") or []
        if "workers.batchlane" in line and "--parent-pid" in line:
            at = line.index("--parent-pid") + 1
            if at < len(line) and line[at].isdigit() and int(line[at]) in parents:
                found.add(process.pid)
    return found


def kill_with_strays(children: Iterable[Killable]) -> None:
    """SIGKILL ``children``, everything below them and their lane processes (also one
    whose worker was killed earlier); return once all of them are gone."""
    children = list(children)
    below = lane_processes({child.pid for child in children}) | {
        pid for child in children if child.alive() for pid in descendants(child.pid)
    }
    seen = identify(below)
    for child in children:
        child.kill()
    kill_all(set(seen))
    wait_until(lambda: not still_running(seen), GONE_WAIT_S, 0.05, "a fleet's processes gone")
