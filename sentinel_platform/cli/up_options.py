"""``sentinel up``'s command line: its options and what they turn into.

The options are read once into :class:`UpOptions`, a frozen value every part of the
start-up (the workers' specs, the Dagster layouts, the start-up report) takes as it is, so
no part reads ``argparse`` itself. One ``--<stream>-workers`` flag per declared stream
comes from the registry, so a stream a module declares gets its flag without an edit here.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass

from sentinel_platform import argtypes
from sentinel_platform.cli.common import CliError, settings_from_env
from sentinel_platform.registry import StreamSpec, stream_specs


@dataclass(frozen=True)
class UpOptions:
    #: stream name (registry) -> how many workers to start for it
    workers: Mapping[str, int]
    host: str
    port: int
    dagster: bool
    demo: bool | None
    stop_timeout_s: float
    production: bool = False
    code_port: int = 4000
    #: --worker-concurrency (a number, or "auto"); None keeps SENTINEL_WORKER_CONCURRENCY
    worker_concurrency: int | str | None = None


_count = argtypes.non_negative


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Every option of ``sentinel up``, on the subcommand's ``parser``."""
    for spec in _declared_streams():
        parser.add_argument(
            spec.workers_flag,
            dest=_workers_dest(spec),
            type=_count,
            default=1,
            metavar="N",
            help=f"workers of stream {spec.name} (default 1)",
        )
    parser.add_argument(
        "--worker-concurrency",
        type=argtypes.concurrency,
        default=None,
        metavar="C",
        help="processor calls each worker makes at once: auto finds the limit, a number pins "
        "it (SENTINEL_WORKER_CONCURRENCY; default auto)",
    )
    parser.add_argument("--host", default="127.0.0.1", help="Dagster webserver host")
    parser.add_argument("--port", type=argtypes.port, default=3000, help="Dagster webserver port")
    parser.add_argument("--no-dagster", action="store_true", help="workers (and Redis) only")
    parser.add_argument(
        "--production",
        action="store_true",
        help="Dagster as separate processes (a gRPC code server, the webserver, the daemon), "
        "each restarted alone, instead of `dagster dev`; see docs/deploy.md",
    )
    parser.add_argument(
        "--code-port",
        type=argtypes.port,
        default=4000,
        metavar="PORT",
        help="port of the code server (127.0.0.1) with --production",
    )
    demo = parser.add_mutually_exclusive_group()
    demo.add_argument(
        "--demo",
        dest="demo",
        action="store_true",
        default=None,
        help="turn the demo schedule on (default: on with the embedded Redis)",
    )
    demo.add_argument("--no-demo", dest="demo", action="store_false")
    parser.add_argument(
        "--stop-timeout",
        type=argtypes.seconds(),
        default=30.0,
        metavar="SECONDS",
        help="how long workers may take to drain before SIGKILL",
    )


def _declared_streams() -> tuple[StreamSpec, ...]:
    """The streams to offer options for, SENTINEL_STREAM_MODULES' included when the
    settings load (a bad setting is reported by ``run``, not while building the parser)."""
    try:
        return stream_specs(settings_from_env())
    except (CliError, ValueError):
        return stream_specs()


def _workers_dest(spec: StreamSpec) -> str:
    return f"workers_{spec.name}".replace("-", "_").replace(":", "_")


def options_from(args: argparse.Namespace) -> UpOptions:
    return UpOptions(
        workers={
            spec.name: getattr(args, _workers_dest(spec))
            for spec in stream_specs()
            if hasattr(args, _workers_dest(spec))
        },
        host=args.host,
        port=args.port,
        dagster=not args.no_dagster,
        demo=args.demo,
        stop_timeout_s=args.stop_timeout,
        production=args.production,
        code_port=args.code_port,
        worker_concurrency=args.worker_concurrency,
    )
