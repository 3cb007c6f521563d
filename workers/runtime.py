"""Wiring one worker process: settings, logging, processor, Redis, metrics, signals.

Everything here is about the *process*, which is why it lives with the worker's entry
point and not in the streams core: the consumer loop
(:class:`~sentinel_platform.streams.consumer.loop.Consumer`) knows nothing about signals,
command lines, log set-up or a metrics endpoint. Bad settings, an unknown processor or a
server whose ``maxmemory-policy`` may evict any key
(:mod:`~sentinel_platform.streams.plumbing.eviction_policy`) fail at start-up with a
message naming the problem, and so does a ``--metrics-port`` that cannot be served (in
use, an address this host lacks): the endpoint is bound before the worker touches Redis.
Redis being unreachable at start-up is retried with backoff rather than crash-looping
under a supervisor, and so is a server that refuses what joining the group needs for now
(full: OOM; a key of the wrong type). A consumer name whose lease another process holds
(a restarted worker's killed predecessor) is waited for, up to two lease TTLs
(:meth:`~sentinel_platform.streams.consumer.healing.lease.Lease.acquire`). SIGTERM/SIGINT cuts
every one of these waits short: the worker logs ``stopped`` and exits 0, having taken
nothing. A server that refuses a needed command outright (an ACL) fails start-up.

The exit status of the process is :func:`run`'s, one of :mod:`sentinel_platform.exit_codes`:
:data:`~sentinel_platform.exit_codes.EXIT_OK` stopped (also during a start-up wait);
:data:`~sentinel_platform.exit_codes.EXIT_USAGE` start-up refused (settings,
``--metrics-port``, processor, credentials, ACL, consumer name still in use after the
wait, also when the name is taken later);
:data:`~sentinel_platform.exit_codes.EXIT_UNCOMMITTED` stopped with outcomes Redis would
not take within ``SENTINEL_SHUTDOWN_TIMEOUT_S`` (they stay pending for the others);
:data:`~sentinel_platform.exit_codes.EXIT_HUNG` given up by the hang watchdog.
"""

from __future__ import annotations

import logging
import signal
import threading
from types import FrameType

from sentinel_platform.logs import BoundLogger, configure_json_logging
from sentinel_platform.registry import StreamSpec
from sentinel_platform.settings import Settings, redact_url
from sentinel_platform.streams.consumer.calling.shared_limit import LimitShare
from sentinel_platform.streams.consumer.healing.lease import LeaseHeldError, LeaseWaitStopped
from sentinel_platform.streams.consumer.loop import Consumer
from sentinel_platform.streams.consumer.metrics import Metrics
from sentinel_platform.streams.consumer.outages import (
    RedisRefusedError,
)
from sentinel_platform.streams.consumer.processor import Processor
from sentinel_platform.streams.plumbing.connection import (
    RedisClient,
    resolve_url,
)
from sentinel_platform.streams.plumbing.keys import StreamKeys, keys_for
from sentinel_platform.streams.sharding.shards import keys_of_shards
from workers.batchlane.process import worker_lane
from workers.batchlane.runner import Lane, run_with_lane
from workers.forwarding import Forwarder, key_reader
from workers.rescreening.runner import rescreen_consumer, run_beside
from workers.shards import consume_shards
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


def install_signal_handlers(stop: threading.Event, worker_log: BoundLogger) -> None:
    def handler(signum: int, _frame: FrameType | None) -> None:
        if not stop.is_set():
            worker_log.info("stop_requested", extra={"signal": signal.Signals(signum).name})
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def serve_metrics(
    metrics: list[Metrics], port: int | None, host: str, worker_log: BoundLogger
) -> None:
    """Serve ``metrics`` (one per shard, on one endpoint) on ``host:port``
    (``--metrics-port``, ``SENTINEL_METRICS_HOST``), before anything touches Redis: a
    port in use or an address this host cannot bind is a bad setting, refused
    (:class:`StartupError`) naming both, never a crash after joining."""
    if port is None:
        return
    try:
        bound = metrics[0].serve(port, host, also=metrics[1:])
    except OSError as exc:  # in use, not an address of this host, unknown name
        raise StartupError(
            f"--metrics-port {port} / SENTINEL_METRICS_HOST {host}: cannot serve metrics on "
            f"{_address(host, port)}: {exc}"
        ) from None
    worker_log.info("metrics_serving", extra={"url": f"http://{_address(host, bound)}/metrics"})


def _address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def stopped_waiting(worker_log: BoundLogger, waiting_for: str) -> int:
    """Asked to stop during a wait for Redis or for the consumer name's lease: nothing was
    taken, so this is a plain stop (exit status 0)."""
    worker_log.info("stopped", extra={"waiting_for": waiting_for})
    return 0


def run(options: WorkerOptions, spec: StreamSpec) -> int:
    """Run one worker of ``spec``'s stream until SIGTERM/SIGINT; the process exit status.

    Start-up order: settings, signal handlers, processor, the metrics endpoint, and only
    then Redis, so every bad setting is refused (exit status 2) before the worker has
    touched Redis. Each start-up wait (Redis unreachable, the consumer name's lease) is
    bounded or cut short by SIGTERM/SIGINT: the worker then logs ``stopped`` and exits 0.
    A stream of several shards is served whole (:mod:`workers.shards`).
    """
    configure_json_logging(options.log_level)
    stop = threading.Event()
    try:
        settings = worker_settings(options)
        keys = keys_for(settings, spec)
        fields = {"stream": keys.stream, "group": keys.group, "consumer": options.consumer}
        worker_log = BoundLogger(log, fields)
        install_signal_handlers(stop, worker_log)
        processor = load_processor(options.processor, settings)
    except StartupError as exc:
        return refused(exc, BoundLogger(log, {}))
    metrics = shard_metrics(fields, spec.shards, getattr(processor, "name", None))
    bind_processor(processor, metrics[0], stop, fields)
    try:
        try:
            serve_metrics(metrics, options.metrics_port, settings.metrics_host, worker_log)
            client = connect_with_retry(settings, stop, worker_log)
        except StartupError as exc:
            return refused(exc, worker_log)
        if client is None:
            return stopped_waiting(worker_log, "redis")
        bind_redis = getattr(processor, "bind_redis", None)
        if callable(bind_redis):  # optional: limits shared with the fleet (the analyzer's)
            bind_redis(client)
        try:
            return consume_stream(client, spec, processor, settings, options, metrics, stop)
        finally:
            client.close()
    finally:
        for each in metrics:
            each.close()


def shard_metrics(fields: dict[str, str], shards: int, processor: str | None) -> list[Metrics]:
    """The metrics of each shard's consumer; a stream of one shard keeps its labels as
    they are, the shards of a stream carry a ``shard`` label besides the stream's."""
    if shards == 1:
        return [Metrics(labels=fields, processor=processor)]
    return [
        Metrics(labels={**fields, "shard": str(shard)}, processor=processor)
        for shard in range(shards)
    ]


def consume_stream(
    client: RedisClient,
    spec: StreamSpec,
    processor: Processor,
    settings: Settings,
    options: WorkerOptions,
    metrics: list[Metrics],
    stop: threading.Event,
) -> int:
    """Consume the stream's one shard on this thread, or each of its shards on a thread of
    its own; the exit status. A shard record that does not match the declared count is
    refused (exit status 2). Each shard's batch lane (the publish path fills each shard's
    own) runs beside the shards' consumers: in a child process of the worker when the
    analyzer's API has a batch lane (:mod:`workers.batchlane.process`)."""
    fields = {"stream": spec.stream_key(settings), "consumer": options.consumer}
    try:
        shards = keys_of_shards(client, settings, spec)
    except ValueError as exc:  # ShardCountChanged, a record that is not one
        return refused(exc, BoundLogger(log, fields))
    lane = worker_lane(client, spec.name, shards, processor, settings, options, stop)
    if len(shards) == 1:
        return consume(client, shards[0], processor, settings, options, metrics[0], stop, lane=lane)

    def consume_shard(shard: int, limit: LimitShare) -> int:
        keys, meters = shards[shard], metrics[shard]
        return consume(client, keys, processor, settings, options, meters, stop, limit)

    key_of = key_reader(processor.parse, processor.natural_key)
    base = keys_for(settings, spec)
    forwarder = Forwarder(client, base, shards, key_of, options.consumer, settings, stop)
    return run_with_lane(
        lambda: consume_shards(shards, settings, consume_shard, forwarder.run, stop, fields),
        lane,
        stop,
        settings.shutdown_timeout_s,
    )


def consume(
    client: RedisClient,
    keys: StreamKeys,
    processor: Processor,
    settings: Settings,
    options: WorkerOptions,
    metrics: Metrics,
    stop: threading.Event,
    limit: LimitShare | None = None,
    lane: Lane | None = None,
) -> int:
    """Join the group and consume until stopped; the exit status. ``limit``: a shard's
    share of its worker's limit (:mod:`workers.shards`). With an analyzer, the stream's
    re-screen queue is consumed beside it (:mod:`workers.rescreening`), and so is ``lane``
    (the stream's batch lane, :func:`~workers.batchlane.process.worker_lane`) when given;
    one shard of many is given none (every shard's lane then runs beside all its shards,
    :func:`consume_stream`)."""
    worker_log = BoundLogger(
        log, {"stream": keys.stream, "group": keys.group, "consumer": options.consumer}
    )
    worker_log.info(
        "worker_starting",
        extra={
            "redis": redact_url(resolve_url(settings)),
            "processor": options.processor,
            "delivery_limit": settings.reclaim_delivery_limit,
            "lease_ttl_ms": settings.lease_ttl_ms,
        },
    )
    consumer = Consumer(
        client, keys, processor, settings, options.consumer, metrics, stop, limit=limit
    )
    if limit is not None:
        limit.count_running(lambda: consumer.calls.running)
    rescreen = rescreen_consumer(
        client, keys, processor, settings, options.consumer, consumer, stop
    )
    try:
        beside = lambda: run_beside(consumer, rescreen, stop)  # noqa: E731
        return run_with_lane(beside, lane, stop, settings.shutdown_timeout_s)
    except LeaseWaitStopped:
        return stopped_waiting(worker_log, "lease")
    except (LeaseHeldError, RedisRefusedError) as exc:
        return refused(exc, worker_log)
