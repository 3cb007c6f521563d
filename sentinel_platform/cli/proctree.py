"""Process bookkeeping through psutil, so ``sentinel up`` can prove it left nothing behind.

``dagster dev`` starts a webserver, a daemon, code servers and, per run, a run worker
with a Spark JVM. Some of them may escape their process group or be re-parented when
their parent dies; the supervisor therefore snapshots the whole tree of each child while
it is alive and checks every pid it has seen at shutdown. A pid is recorded with its
creation time: the pair names one process even after the number is reused. psutil reads
the operating system's process table, so this works on Linux and macOS alike.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal

import psutil

_PR_SET_PDEATHSIG = 1
_GONE = (psutil.NoSuchProcess, psutil.ZombieProcess)
_EXITED = frozenset({psutil.STATUS_ZOMBIE, psutil.STATUS_DEAD})


def start_time(pid: int) -> float:
    """Creation time of ``pid`` (seconds since the epoch; 0 when it is gone)."""
    try:
        return psutil.Process(pid).create_time()
    except psutil.Error:
        return 0.0


def identify(pids: set[int]) -> dict[int, float]:
    return {pid: start_time(pid) for pid in pids}


def process_tree() -> dict[int, list[int]]:
    """parent pid -> child pids for every visible process, from one scan of the table
    (cheaper than asking per supervised child when there are many)."""
    children: dict[int, list[int]] = {}
    for process in psutil.process_iter(["ppid"]):
        parent = process.info.get("ppid")
        if parent is not None:
            children.setdefault(parent, []).append(process.pid)
    return children


def descendants(pid: int, tree: dict[int, list[int]] | None = None) -> set[int]:
    """Every live process below ``pid`` (children, grandchildren, ...)."""
    if tree is None:
        try:
            return {child.pid for child in psutil.Process(pid).children(recursive=True)}
        except psutil.Error:
            return set()
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in tree.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def alive(pid: int) -> bool:
    """True while ``pid`` exists and has not exited: a zombie (exited, not yet reaped) and a
    dead task (being reaped) are gone, whatever the process table still shows."""
    try:
        return psutil.Process(pid).status() not in _EXITED
    except _GONE:
        return False
    except psutil.AccessDenied:
        return True


def _same_processes(seen: dict[int, float]) -> list[psutil.Process]:
    """The processes of ``seen`` (pid -> creation time) still running as themselves."""
    found = []
    for pid, started in seen.items():
        try:
            process = psutil.Process(pid)
            same = not started or process.create_time() == started
        except psutil.Error:
            continue
        if same and alive(pid):
            found.append(process)
    return found


def still_running(seen: dict[int, float]) -> set[int]:
    """Pids of ``seen`` (pid -> creation time) that are still those same processes."""
    return {process.pid for process in _same_processes(seen)}


def kill_all(pids: set[int], sig: int = signal.SIGKILL) -> None:
    for pid in pids:
        with contextlib.suppress(psutil.Error):
            psutil.Process(pid).send_signal(sig)


def reap(seen: dict[int, float], grace_s: float = 5.0) -> list[int]:
    """SIGTERM what is left of ``seen``, wait up to ``grace_s`` for it to exit, SIGKILL the
    rest. Returns the pids that had to be killed.

    A process still in the table when the grace ends is not necessarily ignoring SIGTERM:
    under load one that obeyed may still be tearing itself down. It gets SIGKILL too (no
    harm), but it is counted as killed only if :func:`ended_by_sigkill` says so, from the
    exit status where the process is our child and so has one."""
    processes = _same_processes(seen)
    for process in processes:
        with contextlib.suppress(psutil.Error):
            process.terminate()
    _gone, survivors = psutil.wait_procs(processes, timeout=grace_s)
    survivors = [p for p in survivors if alive(p.pid)]
    for process in survivors:
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(survivors, timeout=grace_s)
    return sorted(p.pid for p in survivors if ended_by_sigkill(getattr(p, "returncode", None)))


def ended_by_sigkill(returncode: int | None) -> bool:
    """Whether a process that outlived the grace was ended by the SIGKILL that followed.

    ``returncode`` is what waiting for it gave: ``-signal`` or an exit code for our own
    children, ``None`` for a process we cannot wait for (re-parented, or still there).
    The kernel fixes the exit status when a fatal SIGTERM is sent, so a slow exit after it
    still reads ``-SIGTERM``; without a status, surviving the grace is all we know."""
    return returncode is None or returncode == -signal.SIGKILL


def die_with_parent() -> None:
    """``preexec_fn``: the kernel sends SIGTERM to this child if the supervisor dies, even
    by SIGKILL, so a crashed ``sentinel up`` does not leave workers and Dagster running.
    Linux only (prctl); elsewhere the supervisor's shutdown reaps the tree instead."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
