"""Child processes of ``sentinel up``: start, restart with backoff, stop in order.

Each child runs in its own session (process group), so a Ctrl-C on the terminal reaches
only the supervisor, which then stops the children in the right order instead of all at
once. A child that crashes is restarted after an exponentially growing delay (reset once
it has stayed up for a while), and every restart is logged with the exit code. The
current pids are kept in a small JSON state file for operators and tests.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from sentinel_platform.cli import proctree
from sentinel_platform.exit_codes import NO_RESTART

log = logging.getLogger("sentinel.up")


@dataclass(frozen=True)
class ChildSpec:
    name: str
    argv: Sequence[str]
    env: Mapping[str, str]
    log_path: Path
    cwd: Path | None = None
    restart: bool = True
    #: Exit codes that mean "misconfigured": restarting cannot help, so none is attempted.
    fatal_exit_codes: tuple[int, ...] = NO_RESTART


@dataclass
class Backoff:
    """Delay before the next restart: doubles per crash, back to ``initial_s`` once a
    child has run for ``stable_s``."""

    initial_s: float = 1.0
    max_s: float = 30.0
    stable_s: float = 30.0
    current_s: float = field(init=False, default=0.0)

    def next_delay(self, ran_s: float) -> float:
        if ran_s >= self.stable_s or self.current_s == 0:
            self.current_s = self.initial_s
        else:
            self.current_s = min(self.current_s * 2, self.max_s)
        return self.current_s


@dataclass
class Child:
    spec: ChildSpec
    backoff: Backoff
    process: subprocess.Popen[bytes] | None = None
    started_at: float = 0.0
    restart_at: float | None = None
    restarts: int = 0
    stopped: bool = False
    seen_pids: dict[int, float] = field(default_factory=dict)  # pid -> creation time

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process and self.process.poll() is None else None


class Supervisor:
    def __init__(self, state_path: Path, backoff: Backoff | None = None) -> None:
        self.state_path = state_path
        self.backoff_template = backoff or Backoff()
        self.children: dict[str, Child] = {}
        self.extra_state: dict[str, object] = {}

    # --- starting ------------------------------------------------------------------------
    def add(self, spec: ChildSpec) -> Child:
        backoff = Backoff(
            self.backoff_template.initial_s,
            self.backoff_template.max_s,
            self.backoff_template.stable_s,
        )
        child = Child(spec, backoff)
        self.children[spec.name] = child
        self._spawn(child)
        return child

    def _spawn(self, child: Child) -> None:
        spec = child.spec
        spec.log_path.parent.mkdir(parents=True, exist_ok=True)
        with spec.log_path.open("ab") as out:
            child.process = subprocess.Popen(
                list(spec.argv),
                env=dict(spec.env),
                cwd=spec.cwd,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=proctree.die_with_parent,
            )
        child.started_at = time.monotonic()
        child.restart_at = None
        child.seen_pids.update(proctree.identify({child.process.pid}))
        log.info("started %s (pid %s, log %s)", spec.name, child.process.pid, spec.log_path)
        self.write_state()

    # --- supervising ---------------------------------------------------------------------
    def poll(self) -> list[Child]:
        """Restart crashed children when their backoff is over; return children that
        exited and are not restartable (the caller decides what that means)."""
        now = time.monotonic()
        finished: list[Child] = []
        tree = proctree.process_tree()
        grew = False
        for child in self.children.values():
            process = child.process
            if process is None or child.stopped:
                continue
            if process.poll() is None:
                seen = len(child.seen_pids)
                child.seen_pids.update(self._new(child, proctree.descendants(process.pid, tree)))
                grew = grew or len(child.seen_pids) != seen
                continue
            if not child.spec.restart or process.returncode in child.spec.fatal_exit_codes:
                finished.append(child)
                continue
            if child.restart_at is None:
                delay = child.backoff.next_delay(now - child.started_at)
                child.restart_at = now + delay
                log.warning(
                    "%s exited with code %s; restarting in %.1fs (restart #%d)",
                    child.spec.name,
                    process.returncode,
                    delay,
                    child.restarts + 1,
                )
            elif now >= child.restart_at:
                child.restarts += 1
                self._spawn(child)
        if grew:
            self.write_state()
        return finished

    # --- stopping ------------------------------------------------------------------------
    def stop(self, names: Sequence[str], timeout_s: float, group: bool = False) -> None:
        """SIGTERM the named children (their whole process group with ``group``), wait up
        to ``timeout_s``, then SIGKILL whatever of their trees is left."""
        targets = [self.children[n] for n in names if n in self.children]
        for child in targets:
            child.stopped = True
            child.restart_at = None
            process = child.process
            if process is None or process.poll() is not None:
                continue
            child.seen_pids.update(self._new(child, proctree.descendants(process.pid)))
            log.info("stopping %s (pid %s)", child.spec.name, process.pid)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                if group:
                    os.killpg(process.pid, signal.SIGTERM)
                else:
                    process.send_signal(signal.SIGTERM)
        deadline = time.monotonic() + timeout_s
        for child in targets:
            self._wait(child, deadline)
        for child in targets:
            self._reap_leftovers(child, group)
            if child.process is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    child.process.wait(5)
        self.write_state()

    def _wait(self, child: Child, deadline: float) -> None:
        process = child.process
        if process is None:
            return
        while time.monotonic() < deadline:
            if process.poll() is not None:
                log.info("%s stopped (exit code %s)", child.spec.name, process.returncode)
                return
            child.seen_pids.update(self._new(child, proctree.descendants(process.pid)))
            time.sleep(0.1)
        log.warning("%s did not stop within the timeout; sending SIGKILL", child.spec.name)
        proctree.kill_all(proctree.still_running(child.seen_pids))

    def _reap_leftovers(self, child: Child, group: bool, grace_s: float = 5.0) -> None:
        """Processes of the child's tree that outlived it (re-parented code servers, run
        workers): SIGTERM, a short grace period, then SIGKILL."""
        leftovers = proctree.still_running(child.seen_pids)
        if not leftovers:
            return
        log.warning("terminating %s leftovers %s", child.spec.name, sorted(leftovers))
        killed = proctree.reap(child.seen_pids, grace_s)
        if killed:
            log.warning("killed %s leftovers %s", child.spec.name, killed)
        if group and child.process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(child.process.pid, signal.SIGKILL)

    @staticmethod
    def _new(child: Child, pids: set[int]) -> dict[int, float]:
        return proctree.identify(pids - child.seen_pids.keys())

    # --- state file ----------------------------------------------------------------------
    def write_state(self) -> None:
        state = {
            "supervisor_pid": os.getpid(),
            **self.extra_state,
            "children": {
                name: {
                    "pid": child.pid,
                    "restarts": child.restarts,
                    "log": str(child.spec.log_path),
                    # pid -> creation time: a pid the system has since reused is not ours
                    "seen_pids": {str(pid): t for pid, t in sorted(child.seen_pids.items())},
                }
                for name, child in self.children.items()
            },
        }
        self.state_path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.state_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=2))
        tmp.replace(self.state_path)
