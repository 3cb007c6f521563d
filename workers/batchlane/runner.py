"""The stream's batch lane, run beside its live consumer.

Which way the lane's entries go is decided once, at start-up, and said once
(``batch_lane_started``, a structured line naming the API, the mode and the pid of the
process running the lane):

* ``batch``: the analyzer's API has a batch lane (``openai``, ``anthropic``,
  :func:`has_batch_lane`): the worker runs it in a child process of its own
  (:mod:`workers.batchlane.process`, off the live consumer's interpreter), where one
  thread runs :class:`~workers.batchlane.lane.BatchLane` over the provider's batch API, with
  the live analyzer's API, key and prompts (the same request bodies), its own HTTP pool
  (:class:`~workers.analyzer.batch.http.BatchHttp`), and none of the real-time path's
  limits: batch tokens are counted against neither the per-minute budget nor the
  in-flight limit (the provider counts them apart);
* ``realtime``: the ``sentinel`` API, or no analyzer: nothing published to the lane is
  stranded: on a thread of the worker, a second consumer
  (:class:`~sentinel_platform.streams.consumer.loop.Consumer` over
  :func:`~workers.batchlane.lane_keys.batch_keys`, the live processor) decides each entry
  in real time, started once the lane holds an entry, as the re-screen queue's is.

Whichever of the live consumer and the lane ends first stops the other; the worker's
exit status is the live consumer's, or the lane's when the live one's is OK.

A sharded stream has one batch lane per shard (the publish path fills each shard's
``batch_stream_key``, in the shard's hash slot, beside the shard's ledger, results and
markers), so every shard's lane runs, each on a thread of its own (:func:`every_lane`),
as one lane beside its shards' consumers (in the lane's process when batched).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable, Sequence
from typing import Any, cast

from sentinel_platform.exit_codes import EXIT_ERROR, EXIT_OK
from sentinel_platform.logs import BoundLogger
from sentinel_platform.settings import Settings
from sentinel_platform.settings.batch import BatchLaneSetting, serves_batches
from sentinel_platform.streams.consumer.healing.lease import LeaseWaitStopped
from sentinel_platform.streams.consumer.loop import Consumer
from sentinel_platform.streams.consumer.metrics import Metrics
from sentinel_platform.streams.consumer.processor import Processor
from sentinel_platform.streams.consumer.settling.outbox import Outbox
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from workers.analyzer.apis.anthropic_api import AnthropicApi
from workers.analyzer.apis.openai_api import OpenAiApi
from workers.analyzer.batch.anthropic_batch import AnthropicBatch
from workers.analyzer.batch.http import BatchHttp
from workers.analyzer.batch.openai_batch import OpenAiBatch
from workers.analyzer.batch.protocol import BatchApi
from workers.analyzer.client import HttpAnalyzer
from workers.batchlane.lane import BatchLane
from workers.batchlane.lane_keys import batch_keys
from workers.batchlane.requests import body_maker
from workers.batchlane.verdicts import BatchVerdicts
from workers.processors.base import WireProcessor
from workers.rescreening.runner import JOIN_MARGIN_S, wait_for_entries

log = logging.getLogger(__name__)

#: What the lane runs on its thread; its exit status.
Lane = Callable[[], int]


def primary_of(analyzer: object) -> HttpAnalyzer | None:
    """The HTTP analyzer that decides first through ``analyzer`` (a lane's live one)."""
    if isinstance(analyzer, HttpAnalyzer):
        return analyzer
    deciders = getattr(analyzer, "deciders", None)
    if callable(deciders):
        for inner in deciders():
            found = primary_of(inner)
            if found is not None:
                return found
    return None


def takes_batches(analyzer: HttpAnalyzer, pinned: BatchLaneSetting = "auto") -> bool:
    """Whether ``analyzer``'s server takes a batch API this lane speaks (OpenAI's or
    Anthropic's; :func:`~sentinel_platform.settings.batch.serves_batches`, ``pinned`` by
    ``SENTINEL_ANALYZER_BATCH_LANE``)."""
    api = analyzer.api
    return isinstance(api, (OpenAiApi, AnthropicApi)) and serves_batches(
        api.kind, analyzer.url, pinned
    )


def batch_api_of(analyzer: HttpAnalyzer, pinned: BatchLaneSetting = "auto") -> BatchApi | None:
    """The batch API in front of ``analyzer``'s model API, None where :func:`takes_batches`
    says its server has none."""
    if not takes_batches(analyzer, pinned):
        return None
    api = analyzer.api
    http = BatchHttp(api, analyzer.url, analyzer.timeout_s)
    if isinstance(api, OpenAiApi):
        return OpenAiBatch(api, http)
    if isinstance(api, AnthropicApi):
        return AnthropicBatch(api, http)
    return None


def has_batch_lane(processor: object, settings: Settings) -> bool:
    """Whether ``processor``'s lane goes through a provider's batch API, decided as
    :func:`batch_lane` decides it (without building the batch API's client)."""
    if not isinstance(processor, WireProcessor):
        return False
    primary = primary_of(processor.analyzer)
    return primary is not None and takes_batches(primary, settings.analyzer_batch_lane)


def batch_lane(
    client: RedisClient,
    keys: StreamKeys,
    processor: Any,
    settings: Settings,
    consumer: str,
    stop: threading.Event,
) -> Lane | None:
    """The lane of ``keys`` beside its live consumer (see the module); None for a
    processor of no declared stream (a plug-in)."""
    if not isinstance(processor, WireProcessor):
        return None
    lane_keys = batch_keys(keys)
    labels = {"stream": lane_keys.stream, "group": lane_keys.group, "consumer": consumer}
    metrics = Metrics(labels=labels, processor=f"{processor.name}_batch")
    lane_log = BoundLogger(log, {"stream": lane_keys.stream, "consumer": consumer})
    primary = primary_of(processor.analyzer)
    api = batch_api_of(primary, settings.analyzer_batch_lane) if primary is not None else None
    kind = primary.api.kind if primary is not None else "rules"
    if primary is None or api is None:
        lane_log.info(
            "batch_lane_started",
            extra={
                "mode": "realtime",
                "api": kind,
                "why": f"the {kind} server has no batch lane",
                "pid": os.getpid(),
            },
        )
        live = Consumer(
            client, lane_keys, cast(Processor, processor), settings, consumer, metrics, stop
        )
        return realtime(live, stop)
    outbox = Outbox(client, lane_keys, settings, consumer, metrics, labels)
    verdicts = BatchVerdicts(processor, settings.analyzer_when_down)
    body_of = body_maker(primary.api, primary.prompts)
    prompt = next(iter(primary.prompts.values()), None)
    lane = BatchLane(client, keys, api, body_of, prompt, verdicts, settings, outbox, consumer, stop)
    lane_log.info("batch_lane_started", extra={"mode": "batch", "api": kind, "pid": os.getpid()})

    def run() -> int:
        try:
            lane.run()
        finally:
            metrics.close()
        return EXIT_OK

    return run


def realtime(live: Consumer, stop: threading.Event) -> Lane:
    """The lane's entries decided in real time by ``live``, once the lane holds one."""

    def run() -> int:
        try:
            return live.run() if wait_for_entries(live, stop) else EXIT_OK
        except LeaseWaitStopped:
            return EXIT_OK
        finally:
            live.metrics.close()

    return run


def every_lane(lanes: Sequence[Lane | None], stop: threading.Event, join_s: float) -> Lane | None:
    """``lanes`` (a sharded stream's shards' lanes) as one lane: each on a thread of its
    own until ``stop`` (which the first to end sets, so one lane ending ends them all, as
    the live consumer's end does); its status the first failing one's, else OK. None
    without a lane; a single lane is itself."""
    present = [lane for lane in lanes if lane is not None]
    if len(present) <= 1:
        return present[0] if present else None

    def run() -> int:
        statuses = [EXIT_OK] * len(present)

        def serve(index: int) -> None:
            try:
                statuses[index] = present[index]()
            except BaseException:  # the thread's owner: logged, never a silent death
                log.exception("batch_lane_failed")
                statuses[index] = EXIT_ERROR
            finally:
                stop.set()

        threads = [
            threading.Thread(target=serve, args=(n,), name=f"batch-lane-{n}", daemon=True)
            for n in range(len(present))
        ]
        for thread in threads:
            thread.start()
        while not stop.wait(0.5):
            pass
        for thread in threads:
            thread.join(join_s + JOIN_MARGIN_S)
        return next((status for status in statuses if status != EXIT_OK), EXIT_OK)

    return run


def run_with_lane(
    main: Callable[[], int], lane: Lane | None, stop: threading.Event, join_s: float
) -> int:
    """Run ``main`` (the live consumer) on this thread and ``lane`` on one of its own;
    the exit status (see the module)."""
    if lane is None:
        return main()
    statuses = [EXIT_OK]

    def serve() -> None:
        try:
            statuses[0] = lane()
        except BaseException:  # the thread's owner: logged, never a silent death
            log.exception("batch_lane_failed")
            statuses[0] = EXIT_ERROR
        finally:
            stop.set()

    thread = threading.Thread(target=serve, name="batch-lane", daemon=True)
    thread.start()
    try:
        status = main()
    finally:
        stop.set()
        thread.join(join_s + JOIN_MARGIN_S)
    return status if status != EXIT_OK else statuses[0]
