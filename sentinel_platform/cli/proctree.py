"""Process bookkeeping from /proc, so ``sentinel up`` can prove it left nothing behind.

``dagster dev`` starts a webserver, a daemon, code servers and, per run, a run worker
with a Spark JVM. Some of them may escape their process group or be re-parented when
their parent dies; the supervisor therefore snapshots the whole tree of each child while
it is alive and checks every pid it has seen at shutdown. Standard library only (no
psutil); on systems without /proc the snapshot is just the direct child.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
from pathlib import Path

PROC = Path("/proc")
_PR_SET_PDEATHSIG = 1


def _parent_of(pid: int) -> int | None:
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name is in parentheses and may contain spaces: split after the last ")".
    fields = stat.rsplit(")", 1)[1].split()
    return int(fields[1])


def _stat_fields(pid: int) -> list[str] | None:
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()


def _state_of(pid: int) -> str | None:
    fields = _stat_fields(pid)
    return fields[0] if fields else None


def start_time(pid: int) -> int:
    """Kernel start time of ``pid`` (clock ticks since boot; 0 when unknown). A pid and its
    start time name one process even after the pid number is reused."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields and len(fields) > 19 else 0


def identify(pids: set[int]) -> dict[int, int]:
    return {pid: start_time(pid) for pid in pids}


def process_tree() -> dict[int, list[int]]:
    """parent pid -> child pids, for every process visible in /proc (one scan)."""
    children: dict[int, list[int]] = {}
    if not PROC.is_dir():
        return children
    for entry in PROC.iterdir():
        if not entry.name.isdigit():
            continue
        parent = _parent_of(int(entry.name))
        if parent is not None:
            children.setdefault(parent, []).append(int(entry.name))
    return children


def descendants(pid: int, tree: dict[int, list[int]] | None = None) -> set[int]:
    """Every live process below ``pid`` (children, grandchildren, ...)."""
    children = process_tree() if tree is None else tree
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    """True while ``pid`` exists and is not a zombie (a zombie has already exited)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return _state_of(pid) not in ("Z", "X")


def still_running(seen: dict[int, int]) -> set[int]:
    """Pids of ``seen`` (pid -> start time) that are still those same processes."""
    return {
        pid
        for pid, started in seen.items()
        if alive(pid) and (started == 0 or start_time(pid) == started)
    }


def kill_all(pids: set[int], sig: int = signal.SIGKILL) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, sig)


def die_with_parent() -> None:
    """``preexec_fn``: the kernel sends SIGTERM to this child if the supervisor dies, even
    by SIGKILL, so a crashed ``sentinel up`` does not leave workers and Dagster running."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
