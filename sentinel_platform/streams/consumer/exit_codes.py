"""Exit statuses of a worker process: each one, once, with what a supervisor should do.

A supervisor (``sentinel up``, systemd, Kubernetes) restarts a worker that ended with
:data:`EXIT_UNCOMMITTED` or :data:`EXIT_HUNG`; restarting one that ended with
:data:`EXIT_USAGE` cannot help until the configuration changes.
"""

from __future__ import annotations

#: Stopped cleanly (also when stopped during a start-up wait, having taken nothing).
EXIT_OK = 0
#: Start-up refused: a bad setting, ``--metrics-port``, processor, credentials, an ACL.
EXIT_USAGE = 2
#: Another live process uses the consumer name (at start-up after the wait, or later):
#: the supervisor's "bad configuration", the same status as :data:`EXIT_USAGE`.
EXIT_NAME_IN_USE = 2
#: Stopped with something left undone within ``SENTINEL_SHUTDOWN_TIMEOUT_S`` (outcomes
#: Redis would not take, messages not handed back, the lease not released, or the stop
#: overran its bound): those messages stay pending and the survivors recover them.
EXIT_UNCOMMITTED = 3
#: The hang watchdog gave the worker up (EX_SOFTWARE): one message was in hand longer
#: than ``SENTINEL_HANG_TIMEOUT_MS``.
EXIT_HUNG = 70
