"""Child processes that do not outlive the test process.

Fixtures stop their processes in ``finally`` blocks, which covers failures and Ctrl-C. A
test process that is itself killed (a CI job timeout, SIGKILL) runs no finaliser, so the
long-lived children (Spark daemons, Redis Cluster nodes) also ask the kernel for a SIGTERM
when their parent dies (Linux ``PR_SET_PDEATHSIG``; it survives ``exec``).
"""

from __future__ import annotations

import ctypes
import signal
from typing import Any

_PR_SET_PDEATHSIG = 1


def _load_prctl() -> Any:
    try:
        return ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):  # not Linux: best effort only
        return None


# Resolved at import so the child, between fork and exec, only calls into libc (no
# imports, no Python locks that another thread of the parent might have held at fork).
_PRCTL = _load_prctl()


def die_with_parent() -> None:
    """``preexec_fn``: SIGTERM this child when the process that started it dies."""
    if _PRCTL is not None:
        _PRCTL(_PR_SET_PDEATHSIG, int(signal.SIGTERM))
