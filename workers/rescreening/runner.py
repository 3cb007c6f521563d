"""The re-screen queue's consumer, run beside its stream's in the same worker process.

Every worker whose processor has an analyzer consumes its stream's re-screen queue, on
one thread owned here, with a ``Consumer`` of its own over the queue
(:func:`~workers.rescreening.queue_keys.rescreen_keys`): its recovery takes over a dead
worker's pending queue entries, its triage dead-letters an unreadable one, its commit is
exactly once per provisional verdict, and a stop hands its entries back, as for any
stream. It calls through the live processor's analyzer, within what the live consumer
leaves (:class:`~workers.rescreening.gate.RescreenLimit`). Its acknowledged entries are
trimmed from below (a retention window of 0, at most every :data:`TRIM_INTERVAL_S`).

The queue's consumer starts only once the queue holds an entry (:func:`wait_for_entries`,
one XLEN a second): a fleet whose analyzer never failed runs no second lease, heartbeat
and recovery per worker for an empty queue. An entry left pending by a dead worker stays
in the queue, so it starts the survivors' consumers, which recover it.

Whichever consumer ends first (a stop, a refusal, an error) stops the other; the worker's
exit status is the live consumer's, or the queue's when the live one's is OK. A demo
worker's processor has no analyzer, so it has no queue consumer (demo entries are
decided by the rules alone and never queued).
"""

from __future__ import annotations

import logging
import threading
from typing import Any

import redis

from sentinel_platform.exit_codes import EXIT_ERROR, EXIT_OK
from sentinel_platform.logs import BoundLogger
from sentinel_platform.settings import Settings
from sentinel_platform.streams.consumer.healing.lease import LeaseWaitStopped
from sentinel_platform.streams.consumer.loop import Consumer
from sentinel_platform.streams.consumer.metrics import Metrics
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from workers.processors.base import WireProcessor
from workers.rescreening.gate import RescreenLimit, analyzer_ready
from workers.rescreening.processor import RescreenProcessor
from workers.rescreening.queue_keys import rescreen_keys

log = logging.getLogger(__name__)

#: Acknowledged queue entries are trimmed at most this often.
TRIM_INTERVAL_S = 5
#: Beyond the shutdown timeout, how long the live side waits for the queue's thread.
JOIN_MARGIN_S = 5.0
#: How often a worker whose queue is empty looks again before starting its consumer.
QUEUE_LOOK_S = 1.0


def queue_settings(settings: Settings) -> Settings:
    """The settings of the queue's consumer: acknowledged entries are kept no longer
    than it takes to trim them (a window of 0), whatever the stream's retention."""
    return settings.model_copy(
        update={
            "stream_retention_enabled": True,
            "stream_retention_s": 0,
            "stream_retention_interval_s": min(
                TRIM_INTERVAL_S, settings.stream_retention_interval_s
            ),
        }
    )


def rescreen_consumer(
    client: RedisClient,
    keys: StreamKeys,
    processor: Any,
    settings: Settings,
    consumer: str,
    live: Consumer,
    stop: threading.Event,
) -> Consumer | None:
    """The consumer of ``keys``' re-screen queue beside ``live``, or None when there is
    nothing to re-screen with (no analyzer: the rules, the demo, a plug-in processor)."""
    if not isinstance(processor, WireProcessor) or processor.analyzer is None:
        return None
    if not keys.rescreen:
        return None
    queue = rescreen_keys(keys)
    rescreen = RescreenProcessor(processor)
    labels = {"stream": queue.stream, "group": queue.group, "consumer": consumer}
    metrics = Metrics(labels=labels, processor=rescreen.name)
    analyzer = processor.analyzer
    limit = RescreenLimit(live, lambda: analyzer_ready(analyzer))
    return Consumer(
        client, queue, rescreen, queue_settings(settings), consumer, metrics, stop, limit=limit
    )


def wait_for_entries(rescreen: Consumer, stop: threading.Event) -> bool:
    """Wait until ``rescreen``'s queue holds an entry (True) or the stop (False). A
    server error only delays the next look: the live consumer reports the server."""
    while not stop.is_set():
        try:
            if rescreen.client.xlen(rescreen.keys.stream):
                return True
        except redis.RedisError:
            pass
        stop.wait(QUEUE_LOOK_S)
    return False


def run_beside(live: Consumer, rescreen: Consumer | None, stop: threading.Event) -> int:
    """Run ``live`` on this thread and ``rescreen`` (if any) on one of its own until both
    have ended; the exit status (see the module). Exceptions of ``live`` propagate once
    the queue's thread has ended."""
    if rescreen is None:
        return live.run()
    statuses = [EXIT_OK]
    queue_log = BoundLogger(log, {"stream": rescreen.keys.stream, "consumer": rescreen.consumer})

    def serve() -> None:
        try:
            if wait_for_entries(rescreen, stop):
                statuses[0] = rescreen.run()
        except LeaseWaitStopped:  # stopped while waiting for its lease: nothing taken
            statuses[0] = EXIT_OK
        except BaseException:  # the thread's owner: logged, never a silent death
            queue_log.exception("rescreen_failed")
            statuses[0] = EXIT_ERROR
        finally:
            stop.set()

    thread = threading.Thread(target=serve, name="rescreen", daemon=True)
    thread.start()
    try:
        status = live.run()
    finally:
        stop.set()
        thread.join(rescreen.settings.shutdown_timeout_s + JOIN_MARGIN_S)
        rescreen.metrics.close()
    return status if status != EXIT_OK else statuses[0]
