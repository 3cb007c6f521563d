"""Exit statuses of every process the platform runs, each defined once, here.

Exit statuses are part of the interface: a supervisor (``sentinel up``, systemd,
Kubernetes) decides on them whether a restart can help, and ``sentinel status`` is meant
as a health probe. The guides write these values out (the ``sentinel status`` exit codes,
the worker exit status table) naming the constants here, and agree with them.

The two families share 0 and 2 with one meaning each (done; bad configuration or command
line, which no restart fixes); above 2 a value means what its family says.
"""

from __future__ import annotations

# --- every process -------------------------------------------------------------------------
#: Done: the command did its job; a worker stopped cleanly (also when stopped during a
#: start-up wait, having taken nothing).
EXIT_OK = 0
#: Bad configuration or command line: a ``sentinel`` command line that is wrong or lacks a
#: confirmation (``--yes``); a worker's start-up refused (a bad setting, ``--metrics-port``,
#: processor, credentials, an ACL). Restarting cannot help until the configuration changes.
EXIT_USAGE = 2

# --- the ``sentinel`` command ----------------------------------------------------------------
#: Could not do the job: bad settings, Redis unreachable, unknown DLQ id, failed replay,
#: no verdict found (``sentinel verdict``).
EXIT_ERROR = 1
#: ``sentinel status``: the worst zone over all streams (nominal is :data:`EXIT_OK`).
EXIT_ELEVATED = 3
EXIT_BACKPRESSURE = 4
EXIT_WORKER_OFF = 5

# --- a worker process (``python -m sentinel_platform.workers <stream>``) ---------------------
# ``sentinel up`` restarts a worker that ended with EXIT_UNCOMMITTED or EXIT_HUNG; it
# stops, rather than restart, one that ended with EXIT_USAGE (or EXIT_NAME_IN_USE).

#: Another live process uses the consumer name (at start-up after the wait, or later):
#: the supervisor's "bad configuration", the same status as :data:`EXIT_USAGE`.
EXIT_NAME_IN_USE = EXIT_USAGE
#: Stopped with something left undone within ``SENTINEL_SHUTDOWN_TIMEOUT_S`` (outcomes
#: Redis would not take, messages not handed back, the lease not released, or the stop
#: overran its bound): those messages stay pending and the survivors recover them.
EXIT_UNCOMMITTED = 3
#: The hang watchdog gave the worker up (EX_SOFTWARE): one message was in hand longer
#: than ``SENTINEL_HANG_TIMEOUT_MS``.
EXIT_HUNG = 70

#: Statuses a supervisor must not restart a process on: the configuration has to change first.
NO_RESTART = (EXIT_USAGE,)
