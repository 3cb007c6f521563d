"""``sentinel exporter``: the streams' health on a Prometheus endpoint, workers or not.

Serves :class:`~sentinel_platform.cli.stream_signals.StreamCollector` (backlog, pending,
oldest pending age, live workers, zone, seconds of work, provisional verdicts waiting to
be re-screened, dead letters, eviction verdict; read from Redis at each scrape) plus this
process's own ``process_*`` metrics, on ``HOST:PORT/metrics``. ``sentinel up`` runs one
as its child ``exporter``; a deployment runs it as a service of its own (docs/deploy.md).

It never needs a worker, and a Redis that is down or slow does not stop it: a scrape
answers ``sentinel_exporter_redis_up 0`` and the next one tries again. A port it cannot
bind is a bad setting: refused at start with exit status 2 (which ``sentinel up`` does
not restart). SIGTERM or SIGINT stop it within a second.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
from types import FrameType

from prometheus_client import CollectorRegistry, ProcessCollector

from sentinel_platform import argtypes
from sentinel_platform.cli.common import CliError, settings_from_env
from sentinel_platform.cli.stream_signals import DEFAULT_TIMEOUT_S, StreamCollector
from sentinel_platform.exit_codes import EXIT_OK, EXIT_USAGE
from sentinel_platform.logs import configure_json_logging
from sentinel_platform.metrics_server import serve_registry
from sentinel_platform.redis_server import running_embedded_url
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import (
    RedisClient,
    RedisConnectError,
    connect,
)

log = logging.getLogger("sentinel.exporter")

#: The exporter's default port when run on its own (``sentinel up`` picks a free one).
DEFAULT_PORT = 9478


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "exporter",
        help="serve the streams' health (lag, oldest pending, live workers, DLQ) to Prometheus",
        description="Serves per-stream health read from Redis at every scrape on "
        "HOST:PORT/metrics, whether or not any worker runs. Stops on SIGTERM/SIGINT.",
    )
    parser.add_argument(
        "--port",
        type=argtypes.whole_number(0, 65_535),
        default=DEFAULT_PORT,
        help=f"port to serve on (default {DEFAULT_PORT}; 0 picks a free one)",
    )
    parser.add_argument(
        "--host",
        default=None,
        help="address to bind (default SENTINEL_METRICS_HOST, 127.0.0.1 unless set)",
    )
    parser.add_argument(
        "--timeout",
        type=argtypes.seconds(0.1),
        default=DEFAULT_TIMEOUT_S,
        metavar="SECONDS",
        help="longest a scrape waits for Redis before it reports it unreachable "
        f"(default {DEFAULT_TIMEOUT_S:g}; keep it below Prometheus' scrape_timeout)",
    )
    parser.set_defaults(handler=run)


def redis_connector(settings: Settings) -> RedisClient:
    """A client for ``REDIS_URL``, or for this home's embedded server while it runs."""
    url = settings.redis_url_value or running_embedded_url(settings)
    if not url:
        raise RedisConnectError(f"the embedded Redis of {settings.home_dir} is not running")
    return connect(settings, url=url)


def build_registry(collector: StreamCollector) -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    ProcessCollector(registry=registry)
    registry.register(collector)
    return registry


def run(args: argparse.Namespace) -> int:
    configure_json_logging("INFO")
    settings = settings_from_env()
    host = args.host or settings.metrics_host
    stop = threading.Event()

    def on_signal(signum: int, _frame: FrameType | None) -> None:
        if not stop.is_set():
            log.info("stop_requested", extra={"signal": signal.Signals(signum).name})
        stop.set()

    previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
    collector = StreamCollector(settings, lambda: redis_connector(settings), args.timeout)
    try:
        try:
            server, thread = serve_registry(build_registry(collector), args.port, host)
        except OSError as exc:
            raise CliError(
                f"--port {args.port} / --host {host}: cannot serve metrics there: {exc}",
                EXIT_USAGE,
            ) from None
        port = int(server.server_address[1])
        log.info("exporter_serving", extra={"url": f"http://{host}:{port}/metrics"})
        try:
            while not stop.wait(1.0):
                pass
        finally:
            server.shutdown()
            server.server_close()
            thread.join(5)
        log.info("exporter_stopped")
        return EXIT_OK
    finally:
        collector.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
