"""The batch lane in a child process of its worker, off the live consumer's interpreter.

The lane's bulk work (reading a thousand entries a call, building and uploading a batch
of up to the provider's request limit, parsing its results, committing hundreds of
verdicts at a time) is CPU work in Python: on a thread of the worker it competes with the
live consumer's threads for the interpreter, and the live stream's latency pays for it.
So a worker whose analyzer's API has a batch lane runs the lane(s) of its stream in one
child process of its own (``python -m workers.batchlane``, :mod:`workers.batchlane.child`),
with the worker's environment and options, the consumer name suffixed with
:data:`LANE_SUFFIX`; an API without one keeps its real-time lane on a thread
(:mod:`workers.batchlane.runner`: per-message work, sharing the worker's limits).

Ownership (:func:`lane_process`, run on the lane's thread by
:func:`~workers.batchlane.runner.run_with_lane`):

* started beside the live consumer; its log lines are the same JSON lines, on the
  worker's own stderr (inherited);
* the worker's stop sends it SIGTERM (it stops at the end of its lane's step) and waits
  ``SENTINEL_SHUTDOWN_TIMEOUT_S`` for it, then SIGKILLs it;
* it ending by itself ends the worker, as the lane's thread did; its exit status is
  logged (``batch_lane_exited``) and is the worker's when the live one's is OK;
* it exits by itself once its parent is gone (it watches ``os.getppid()``), so a
  SIGKILLed worker leaves no lane behind. Nothing is lost to a killed lane: its lease
  lapses and whoever takes it resumes from the ledger.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sentinel_platform.exit_codes import EXIT_ERROR, EXIT_OK
from sentinel_platform.logs import BoundLogger
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from workers.batchlane.runner import Lane, batch_lane, every_lane, has_batch_lane

if TYPE_CHECKING:
    from workers.startup import WorkerOptions

log = logging.getLogger(__name__)

#: The lane's consumer name is its worker's with this suffix.
LANE_SUFFIX = "-batch"
#: How often the lane's owner looks at the stop and at the child.
LOOK_S = 0.2
#: How long a SIGKILLed child is waited for (the kernel reaps it at once).
KILL_WAIT_S = 2.0
#: The directory holding the ``workers`` package: the child imports the worker's code.
CODE_ROOT = str(Path(__file__).resolve().parents[2])


def worker_lane(
    client: RedisClient,
    stream: str,
    shards: Sequence[StreamKeys],
    processor: object,
    settings: Settings,
    options: WorkerOptions,
    stop: threading.Event,
) -> Lane | None:
    """The lane(s) of ``stream``'s ``shards`` beside its live consumer: in a child process
    when the analyzer's API has a batch lane, else each shard's real-time lane on a thread
    (:func:`~workers.batchlane.runner.batch_lane`); None for a plug-in processor."""
    if has_batch_lane(processor, settings):
        return lane_process(stream, options, stop, settings.shutdown_timeout_s)
    lanes = [
        batch_lane(client, keys, processor, settings, options.consumer, stop) for keys in shards
    ]
    return every_lane(lanes, stop, settings.shutdown_timeout_s)


def lane_command(stream: str, options: WorkerOptions, parent_pid: int) -> list[str]:
    """The child's command line: the worker's stream, processor and setting overrides,
    its consumer name suffixed, the parent it watches."""
    command = [sys.executable, "-m", "workers.batchlane", stream]
    command += ["--consumer", options.consumer + LANE_SUFFIX, "--processor", options.processor]
    command += ["--parent-pid", str(parent_pid), "--log-level", options.log_level]
    overrides = {
        "--count": options.count,
        "--concurrency": options.concurrency,
        "--block-ms": options.block_ms,
        "--simulate-latency-ms": options.simulate_latency_ms,
    }
    for flag, value in overrides.items():
        if value is not None:
            command += [flag, str(value)]
    return command


def child_env(environ: dict[str, str], code_root: str = CODE_ROOT) -> dict[str, str]:
    """The worker's environment, with its code first on the child's path."""
    path = environ.get("PYTHONPATH")
    return {**environ, "PYTHONPATH": code_root if not path else f"{code_root}{os.pathsep}{path}"}


def exit_status(returncode: int, signalled: bool) -> int:
    """The lane's exit status from its process's: its own when it exited, OK when a
    signal the worker sent ended it (a stop during its start-up, or SIGKILL at the
    deadline: its lease and ledger lose nothing), an error when another's signal did."""
    if returncode >= 0:
        return returncode
    return EXIT_OK if signalled else EXIT_ERROR


def lane_process(
    stream: str, options: WorkerOptions, stop: threading.Event, deadline_s: float
) -> Lane:
    """The lane of ``stream`` run in a child process (see the module); ``deadline_s`` is
    how long a stop waits for it before SIGKILL."""
    lane_log = BoundLogger(log, {"stream": stream, "consumer": options.consumer})

    def run() -> int:
        if stop.is_set():
            return EXIT_OK
        child = subprocess.Popen(
            lane_command(stream, options, os.getpid()),
            env=child_env(dict(os.environ)),
            stdin=subprocess.DEVNULL,
        )
        lane_log.info("batch_lane_process_started", extra={"pid": child.pid})
        try:
            while child.poll() is None and not stop.wait(LOOK_S):
                pass
            signalled = ended(child, deadline_s, lane_log)
        except BaseException:  # the owner never leaves its child behind
            child.kill()
            raise
        status = exit_status(child.returncode, signalled)
        lane_log.info(
            "batch_lane_exited",
            extra={"pid": child.pid, "returncode": child.returncode, "status": status},
        )
        return status

    return run


def ended(child: subprocess.Popen[bytes], deadline_s: float, lane_log: BoundLogger) -> bool:
    """``child`` ended: asked with SIGTERM, SIGKILLed after ``deadline_s``; whether the
    worker signalled it (False: it had exited by itself)."""
    if child.poll() is not None:
        return False
    child.send_signal(signal.SIGTERM)
    try:
        child.wait(deadline_s)
    except subprocess.TimeoutExpired:
        lane_log.warning("batch_lane_killed", extra={"pid": child.pid, "after_s": deadline_s})
        child.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            child.wait(KILL_WAIT_S)
    return True
