"""What a worker process and its batch lane's process both start from: the command line's
choices (:class:`WorkerOptions`), the settings they give (:func:`worker_settings`), the
processor (:func:`load_processor`, :func:`bind_processor`) and a refused start
(:class:`StartupError`, :func:`refused`: exit status 2), and Redis reached at start-up
(:func:`connect_with_retry`: an unreachable server retried with backoff, an evicting one
refused).

Apart from :mod:`workers.runtime`, which wires the worker and starts the lane's process
(:mod:`workers.batchlane`), so the lane's process can start the same way without the
two importing each other.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import threading
from dataclasses import dataclass
from typing import Any

from sentinel_platform.exit_codes import EXIT_USAGE
from sentinel_platform.logs import BoundLogger
from sentinel_platform.settings import Settings, SettingsError, load_settings, redact_url
from sentinel_platform.streams.backlog.zones import in_flight_problem
from sentinel_platform.streams.consumer.metrics import Metrics
from sentinel_platform.streams.consumer.outages import BACKOFF_CAP_S, BACKOFF_START_S
from sentinel_platform.streams.consumer.processor import Processor
from sentinel_platform.streams.consumer.stopping.startup_wait import until_stopped
from sentinel_platform.streams.plumbing.backoff import Backoff
from sentinel_platform.streams.plumbing.connection import (
    TRANSIENT_ERRORS,
    RedisClient,
    RedisConnectError,
    connect,
    resolve_url,
)
from sentinel_platform.streams.plumbing.eviction_policy import server_verdict


@dataclass(frozen=True)
class WorkerOptions:
    """Command-line choices of one worker; ``None`` means "from settings"."""

    consumer: str
    processor: str
    count: int | None = None
    concurrency: int | str | None = None
    block_ms: int | None = None
    simulate_latency_ms: int | None = None
    metrics_port: int | None = None
    log_level: str = "INFO"

    @classmethod
    def from_args(cls, args: argparse.Namespace, consumer: str) -> WorkerOptions:
        """The options of a parsed command line: a worker's, or its batch lane process's
        (which serves no metrics of its own)."""
        return cls(
            consumer=consumer,
            processor=args.processor,
            count=args.count,
            concurrency=args.concurrency,
            block_ms=args.block_ms,
            simulate_latency_ms=args.simulate_latency_ms,
            metrics_port=getattr(args, "metrics_port", None),
            log_level=args.log_level,
        )


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
    if problem is not None:  # its own share of the fleet's in-flight messages
        raise StartupError(problem)
    return settings


def refused(exc: BaseException, worker_log: BoundLogger) -> int:
    """Start-up refused: one JSON line and one plain ``error:`` line; exit status 2."""
    worker_log.error("startup_failed", extra={"error": str(exc)})
    print(f"error: {exc}", file=sys.stderr)
    return EXIT_USAGE


def bind_processor(
    processor: Processor, metrics: Metrics, stop: threading.Event, fields: dict[str, str]
) -> None:
    """Hand the processor what it may use of the worker (each optional): metrics of its
    own (the analyzer's, beside the first shard's), the stop its waits must end (rate
    slots), the fields of its log lines."""
    bind_metrics = getattr(processor, "bind_metrics", None)
    if callable(bind_metrics):
        bind_metrics(metrics)
    bind_stop = getattr(processor, "bind_stop", None)
    if callable(bind_stop):
        bind_stop(stop)
    bind_log_fields = getattr(processor, "bind_log_fields", None)
    if callable(bind_log_fields):
        bind_log_fields(fields)


def check_eviction_policy(client: RedisClient, settings: Settings, worker_log: BoundLogger) -> None:
    """Refuse (:class:`StartupError`) a server that may evict any key, unless
    ``SENTINEL_ALLOW_EVICTING_SERVER`` accepts it; log one warning for a server that may
    evict keys with a TTL (or an accepted one), one info line otherwise. Before joining the
    group: a refused worker has taken no lease and created nothing."""
    verdict = server_verdict(client, settings.allow_evicting_server)
    fields = {
        "maxmemory_policy": verdict.policy,
        "verdict": verdict.level,
        "accepted": verdict.accepted,
        "reason": verdict.message,
    }
    if verdict.refused:
        raise StartupError(f"Redis at {redact_url(resolve_url(settings))}: {verdict.message}")
    if verdict.level == "warn":
        worker_log.warning("redis_may_evict_keys", extra=fields)
    else:
        worker_log.info("redis_eviction_policy", extra=fields)


def connect_once(settings: Settings, worker_log: BoundLogger) -> RedisClient | str:
    """A connected client whose server passed the eviction-policy check, or why Redis
    cannot be reached now (worth another try). What no retry can change (credentials, a
    refused eviction policy) raises :class:`StartupError`."""
    try:
        client = connect(settings)
    except RedisConnectError as exc:
        if "cannot reach" not in str(exc):
            raise StartupError(str(exc)) from None
        return str(exc)
    try:
        check_eviction_policy(client, settings, worker_log)
    except TRANSIENT_ERRORS as exc:
        client.close()
        return f"cannot reach Redis at {redact_url(resolve_url(settings))}: {exc}"
    except BaseException:
        client.close()
        raise
    return client


def connect_with_retry(
    settings: Settings, stop: threading.Event, worker_log: BoundLogger
) -> RedisClient | None:
    """:func:`connect_once` until it connects, retrying an unreachable server with backoff;
    None once ``stop`` is set. Each attempt runs on a thread of its own
    (:func:`~sentinel_platform.streams.consumer.stopping.startup_wait.until_stopped`), so SIGTERM
    ends the wait at once even while an attempt is stuck on a server that never answers."""
    backoff = Backoff(BACKOFF_START_S, BACKOFF_CAP_S)  # capped and jittered: see Backoff
    while not stop.is_set():
        outcome = until_stopped(lambda: connect_once(settings, worker_log), stop, "connect")
        if outcome is None:
            return None
        if not isinstance(outcome, str):
            return outcome
        worker_log.warning("redis_unavailable", extra={"error": outcome})
        stop.wait(backoff.next_delay())
    return None
