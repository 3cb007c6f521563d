"""What Linux's ``/proc`` says of a process: its CPU time, and which child runs a command.

CPU seconds per message are what a busy machine cannot hide, where wall-clock rates swing:
the benchmarks read them beside every rate (:func:`cpu_seconds`, :func:`spent`), and find
a server they started by a word of its command line (:func:`child_pid`).
"""

from __future__ import annotations

import os
from pathlib import Path


def cpu_seconds(pid: int | None) -> float | None:
    """User + system CPU time of a live process; None where unknown."""
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def spent(pid: int | None, before: float | None) -> float | None:
    """CPU seconds of ``pid`` since it had ``before``; None where either is unknown."""
    after = cpu_seconds(pid)
    return after - before if after is not None and before is not None else None


def child_pid(marker: str) -> int | None:
    """The pid of this process's child whose command line contains ``marker``; None if
    there is none."""
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            stat = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            argv = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if int(stat[1]) == os.getpid() and marker in argv:
            return int(entry.name)
    return None
