"""Wiring one worker process: settings, logging, processor, Redis, metrics, signals.

Everything here is about the *process*; the consumer loop itself knows nothing about
signals or command lines. Bad settings, an unknown processor or a server whose
``maxmemory-policy`` may evict any key (:mod:`~sentinel_platform.streams.plumbing.eviction_policy`)
fail at start-up with a message naming the problem (exit status 2); Redis being
unreachable at start-up is retried with backoff rather than crash-looping under a
supervisor, and so is a server that refuses what joining the group needs for now (full:
OOM; a key of the wrong type): SIGTERM still stops the wait. A server that refuses a
needed command outright (an ACL) fails start-up with exit status 2.

Exit status of a worker process: 0 stopped; 2 start-up refused (settings, processor,
credentials, ACL, consumer name in use, also when the name is taken later); 3
``EXIT_UNCOMMITTED``, stopped with outcomes Redis would not take within
``SENTINEL_SHUTDOWN_TIMEOUT_S`` (they stay pending for the others); 70 ``EXIT_HUNG``
(``watchdog.py``).
"""

from __future__ import annotations

import importlib
import logging
import signal
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any

from sentinel_platform.logs import configure_json_logging
from sentinel_platform.settings import Settings, SettingsError, load_settings, redact_url
from sentinel_platform.streams.consumer.lease import LeaseHeldError
from sentinel_platform.streams.consumer.loop import (
    BACKOFF_CAP_S,
    BACKOFF_START_S,
    Consumer,
    RedisRefusedError,
)
from sentinel_platform.streams.consumer.metrics import Metrics
from sentinel_platform.streams.consumer.processor import Processor
from sentinel_platform.streams.plumbing.backoff import Backoff
from sentinel_platform.streams.plumbing.connection import (
    TRANSIENT_ERRORS,
    RedisClient,
    RedisConnectError,
    connect,
    resolve_url,
)
from sentinel_platform.streams.plumbing.eviction_policy import server_verdict
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform.streams.pool.zones import in_flight_problem

log = logging.getLogger(__name__)

KeysFor = Callable[[Settings], StreamKeys]
EXIT_USAGE = 2


@dataclass(frozen=True)
class WorkerOptions:
    """Command-line choices of one worker; ``None`` means "from settings"."""

    consumer: str
    processor: str
    count: int | None = None
    concurrency: int | None = None
    block_ms: int | None = None
    simulate_latency_ms: int | None = None
    metrics_port: int | None = None
    log_level: str = "INFO"


class StartupError(RuntimeError):
    """The worker cannot start (settings, processor, credentials); exit status 2."""


def load_processor(spec: str, settings: Settings) -> Processor:
    """Build a processor from ``module:factory`` (factory(settings) -> Processor)."""
    module_name, _, attr = spec.partition(":")
    try:
        factory: Any = getattr(importlib.import_module(module_name), attr)
    except (ImportError, AttributeError) as exc:
        raise StartupError(f"--processor {spec}: cannot load it ({exc})") from None
    processor: Processor = factory(settings)
    missing = [name for name in ("parse", "natural_key", "process") if not hasattr(processor, name)]
    if missing:
        raise StartupError(f"--processor {spec}: the processor has no {', '.join(missing)}")
    return processor


def worker_settings(options: WorkerOptions) -> Settings:
    overrides = {
        "simulate_latency_ms": options.simulate_latency_ms,
        "read_count": options.count,
        "worker_concurrency": options.concurrency,
        "block_ms": options.block_ms,
    }
    try:
        base = load_settings()
        changed = {k: v for k, v in overrides.items() if v is not None}
        settings = load_settings(**{**base.model_dump(), **changed}) if changed else base
    except SettingsError as exc:
        raise StartupError(str(exc)) from None
    problem = in_flight_problem(settings, workers=1, who="one worker")
    if problem is not None:  # its own share of the pool's in-flight messages
        raise StartupError(problem)
    return settings


def install_signal_handlers(stop: threading.Event, log_fields: dict[str, str]) -> None:
    def handler(signum: int, _frame: FrameType | None) -> None:
        if not stop.is_set():
            log.info("stop_requested", extra={**log_fields, "signal": signal.Signals(signum).name})
        stop.set()

    signal.signal(signal.SIGTERM, handler)
    signal.signal(signal.SIGINT, handler)


def check_eviction_policy(
    client: RedisClient, settings: Settings, log_fields: dict[str, str]
) -> None:
    """Refuse (:class:`StartupError`) a server that may evict any key, unless
    ``SENTINEL_ALLOW_EVICTING_SERVER`` accepts it; log one warning for a server that may
    evict keys with a TTL (or an accepted one), one info line otherwise. Before joining the
    group: a refused worker has taken no lease and created nothing."""
    verdict = server_verdict(client, settings.allow_evicting_server)
    fields = {
        **log_fields,
        "maxmemory_policy": verdict.policy,
        "verdict": verdict.level,
        "accepted": verdict.accepted,
        "reason": verdict.message,
    }
    if verdict.refused:
        raise StartupError(f"Redis at {redact_url(resolve_url(settings))}: {verdict.message}")
    if verdict.level == "warn":
        log.warning("redis_may_evict_keys", extra=fields)
    else:
        log.info("redis_eviction_policy", extra=fields)


def connect_with_retry(
    settings: Settings, stop: threading.Event, log_fields: dict[str, str]
) -> Any:
    """Connect and check the eviction policy, retrying an unreachable server with backoff;
    wrong credentials and a refused eviction policy are fatal."""
    backoff = Backoff(BACKOFF_START_S, BACKOFF_CAP_S)  # capped and jittered: see backoff.py
    while True:
        try:
            client = connect(settings)
        except RedisConnectError as exc:
            if "cannot reach" not in str(exc):
                raise StartupError(str(exc)) from None
            error = str(exc)
        else:
            try:
                check_eviction_policy(client, settings, log_fields)
                return client
            except TRANSIENT_ERRORS as exc:
                error = f"cannot reach Redis at {redact_url(resolve_url(settings))}: {exc}"
                client.close()
            except BaseException:
                client.close()
                raise
        log.warning("redis_unavailable", extra={**log_fields, "error": error})
        if stop.wait(backoff.next_delay()):
            return None


def run(options: WorkerOptions, keys_for: KeysFor) -> int:
    """Run one worker until SIGTERM/SIGINT; the process exit status."""
    configure_json_logging(options.log_level)
    stop = threading.Event()
    try:
        settings = worker_settings(options)
        keys = keys_for(settings)
        fields = {"stream": keys.stream, "group": keys.group, "consumer": options.consumer}
        install_signal_handlers(stop, fields)
        processor = load_processor(options.processor, settings)
        client = connect_with_retry(settings, stop, fields)
    except StartupError as exc:
        log.error("startup_failed", extra={"error": str(exc)})
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if client is None:
        return 0
    metrics = Metrics(labels=fields, processor=getattr(processor, "name", None))
    bind_metrics = getattr(processor, "bind_metrics", None)
    if callable(bind_metrics):  # optional: a processor with its own metrics (the analyzer's)
        bind_metrics(metrics)
    if options.metrics_port is not None:
        host = settings.metrics_host
        port = metrics.serve(options.metrics_port, host)
        log.info("metrics_serving", extra={**fields, "url": f"http://{host}:{port}/metrics"})
    log.info(
        "worker_starting",
        extra={
            **fields,
            "redis": redact_url(resolve_url(settings)),
            "processor": options.processor,
            "delivery_limit": settings.reclaim_delivery_limit,
            "lease_ttl_ms": settings.lease_ttl_ms,
        },
    )
    consumer = Consumer(client, keys, processor, settings, options.consumer, metrics, stop)
    try:
        return consumer.run()
    except (LeaseHeldError, RedisRefusedError) as exc:
        log.error("startup_failed", extra={**fields, "error": str(exc)})
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    finally:
        metrics.close()
        client.close()
