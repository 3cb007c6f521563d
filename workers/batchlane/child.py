"""The batch lane's own process: ``python -m workers.batchlane STREAM --consumer ...``.

Started by a worker (:mod:`workers.batchlane.process`) with its environment and options,
it runs the lane of each of the stream's shards (:func:`~workers.batchlane.runner.batch_lane`,
one thread each when there are several) until it is stopped: SIGTERM/SIGINT, or its
parent gone (:func:`watch_parent` sees ``os.getppid()`` change), each lane then ending at
its step's end. It runs at a lower CPU priority than its worker (:data:`LANE_NICENESS`).
Its logs are the worker's JSON lines; its exit status is the lanes'
(:func:`~workers.batchlane.runner.every_lane`), or one of the worker's start-up statuses
(:mod:`sentinel_platform.exit_codes`: settings or processor refused, stream shards
that do not match).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import threading
from types import FrameType

from sentinel_platform import argtypes
from sentinel_platform.exit_codes import EXIT_OK
from sentinel_platform.logs import LOG_LEVELS, BoundLogger, configure_json_logging
from sentinel_platform.registry import StreamSpec, spec_for
from sentinel_platform.settings import Settings, redact_url
from sentinel_platform.streams.consumer.metrics import Metrics
from sentinel_platform.streams.plumbing.connection import (
    resolve_url,
)
from sentinel_platform.streams.sharding.shards import keys_of_shards
from workers.batchlane.runner import batch_lane, every_lane
from workers.startup import (
    StartupError,
    WorkerOptions,
    bind_processor,
    connect_with_retry,
    load_processor,
    refused,
    worker_settings,
)

log = logging.getLogger(__name__)

#: How often the lane's process looks for its parent.
PARENT_LOOK_S = 0.5
#: The lane's CPU priority below its worker's: past data waits hours at the provider
#: anyway, so on a busy host the live consumer gets the cores first.
LANE_NICENESS = 10


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m workers.batchlane",
        description="Run a stream's batch lane for the worker that started it.",
    )
    parser.add_argument("stream")
    parser.add_argument("--consumer", required=True)
    parser.add_argument("--processor", required=True)
    parser.add_argument("--parent-pid", type=int, required=True)
    parser.add_argument("--log-level", default="INFO", type=str.upper, choices=LOG_LEVELS)
    parser.add_argument("--count", type=int, default=None)
    parser.add_argument("--concurrency", type=argtypes.concurrency, default=None)
    parser.add_argument("--block-ms", type=int, default=None)
    parser.add_argument("--simulate-latency-ms", type=int, default=None)
    return parser.parse_args(argv)


def stop_on_signals(stop: threading.Event, lane_log: BoundLogger) -> None:
    """SIGTERM/SIGINT (its worker stopping, a terminal's Ctrl-C) set ``stop``; said once
    as the lane's own line, apart from the worker's ``stop_requested``."""

    def handler(signum: int, _frame: FrameType | None) -> None:
        if not stop.is_set():
            lane_log.info(
                "batch_lane_stop_requested", extra={"signal": signal.Signals(signum).name}
            )
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def parent_gone(parent_pid: int, current_ppid: int) -> bool:
    """Whether the process that started the lane is gone: its child was re-parented."""
    return current_ppid != parent_pid


def watch_parent(parent_pid: int, stop: threading.Event, lane_log: BoundLogger) -> None:
    """Set ``stop`` once the parent is gone (or the stop is set otherwise)."""
    while not stop.wait(PARENT_LOOK_S):
        if parent_gone(parent_pid, os.getppid()):
            lane_log.warning("batch_lane_parent_gone", extra={"parent_pid": parent_pid})
            stop.set()


def main(argv: list[str] | None = None) -> int:
    """Run the lane(s) until stopped; the exit status (see the module)."""
    args = parse(argv)
    configure_json_logging(args.log_level)
    with contextlib.suppress(OSError):  # raising one's own niceness is always allowed
        os.nice(LANE_NICENESS)
    stop = threading.Event()
    options = WorkerOptions.from_args(args, args.consumer)
    lane_log = BoundLogger(log, {"stream": args.stream, "consumer": args.consumer})
    watcher = threading.Thread(
        target=watch_parent, args=(args.parent_pid, stop, lane_log), name="lane-parent"
    )
    watcher.daemon = True
    watcher.start()
    try:
        stop_on_signals(stop, lane_log)
        settings = worker_settings(options)
        processor = load_processor(args.processor, settings)
        spec = spec_for(args.stream, settings)
        metrics = Metrics(labels={"stream": args.stream, "consumer": args.consumer})
        bind_processor(processor, metrics, stop, {"stream": args.stream})
        try:
            return serve(settings, spec, processor, options, stop, lane_log)
        finally:
            metrics.close()
    except StartupError as exc:
        return refused(exc, lane_log)
    finally:
        stop.set()
        watcher.join(PARENT_LOOK_S * 2)


def serve(
    settings: Settings,
    spec: StreamSpec,
    processor: object,
    options: WorkerOptions,
    stop: threading.Event,
    lane_log: BoundLogger,
) -> int:
    """Connect and run every shard's lane on this thread until stopped."""
    client = connect_with_retry(settings, stop, lane_log)
    if client is None:
        return EXIT_OK
    try:
        lane_log.info("batch_lane_connected", extra={"redis": redact_url(resolve_url(settings))})
        try:
            shards = keys_of_shards(client, settings, spec)
        except ValueError as exc:  # ShardCountChanged, a record that is not one
            return refused(exc, lane_log)
        lanes = [
            batch_lane(client, keys, processor, settings, options.consumer, stop) for keys in shards
        ]
        lane = every_lane(lanes, stop, settings.shutdown_timeout_s)
        return lane() if lane is not None else EXIT_OK
    finally:
        client.close()
