"""The worker command line: ``python -m sentinel_platform.workers <stream> [options]``.

Which stream, which consumer group and which processor all come from the stream's
:class:`~sentinel_platform.registry.StreamSpec`; the options only tune one process, which
:func:`workers.runtime.run` then sets up and runs. :func:`main` serves every declared
stream; :func:`run_worker` is also what the historical ``workers.watch_*`` commands call.
"""

from __future__ import annotations

import argparse
import os
import secrets
import socket
import sys

from sentinel_platform import argtypes
from sentinel_platform.exit_codes import EXIT_USAGE
from sentinel_platform.logs import LOG_LEVELS
from sentinel_platform.registry import UnknownStreamError, spec_for, stream_specs
from sentinel_platform.settings import Settings, SettingsError, load_settings
from workers.runtime import run
from workers.startup import WorkerOptions


def default_consumer_name() -> str:
    """hostname-pid-suffix: readable in XINFO CONSUMERS, and unique per process.

    hostname-pid alone is not unique: containers sharing a hostname (host networking, a
    fixed ``hostname:``) are all pid 1. The random suffix keeps their names apart.
    """
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


positive = argtypes.positive
non_negative = argtypes.non_negative


def processor_spec(value: str) -> str:
    module, sep, factory = value.partition(":")
    if not (module and sep and factory):
        raise argparse.ArgumentTypeError(f"{value!r} is not of the form module:factory")
    return value


def build_parser(
    prog: str, description: str, default_processor: str | None = None
) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument(
        "--consumer",
        default=None,
        help="consumer name in the group, unique among live workers "
        "(default: hostname-pid-<random suffix>, unique per process)",
    )
    parser.add_argument(
        "--count", type=positive, default=None, help="batch size of each read (SENTINEL_READ_COUNT)"
    )
    parser.add_argument(
        "--concurrency",
        type=argtypes.concurrency,
        default=None,
        help="processor calls made at once by this process: auto finds the limit, a number "
        "pins it (SENTINEL_WORKER_CONCURRENCY; default auto)",
    )
    parser.add_argument(
        "--block-ms",
        type=non_negative,
        default=None,
        help="longest a read blocks waiting for new messages, capped at 1000 so recovery "
        "runs every second; 0 polls (SENTINEL_BLOCK_MS)",
    )
    parser.add_argument(
        "--simulate-latency-ms",
        type=non_negative,
        default=None,
        help="extra processing time per message, for demos and backpressure tests "
        "(SENTINEL_SIMULATE_LATENCY_MS)",
    )
    parser.add_argument(
        "--metrics-port",
        type=non_negative,
        default=None,
        help="serve Prometheus metrics on SENTINEL_METRICS_HOST:PORT/metrics "
        "(host 127.0.0.1 unless set; 0 picks a free port)",
    )
    parser.add_argument(
        "--processor",
        type=processor_spec,
        default=default_processor,
        help="module:factory called with the settings to build the processor "
        f"(default: {default_processor})",
    )
    parser.add_argument("--log-level", default="INFO", type=str.upper, choices=LOG_LEVELS)
    return parser


def run_worker(stream: str, argv: list[str] | None = None, prog: str | None = None) -> int:
    """Parse the command line and run one worker of ``stream`` until it is stopped.

    ``stream`` is a registry name; an unknown one exits 2 naming the declared streams.
    """
    try:
        settings: Settings | None = load_settings()
    except SettingsError:
        settings = None  # run() reports it as its JSON startup_failed line
    try:
        spec = spec_for(stream, settings)
    except (UnknownStreamError, ValueError) as exc:
        print(f"{prog or 'python -m sentinel_platform.workers'}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    prog = prog or f"python -m sentinel_platform.workers {spec.name}"
    description = f"Consume the {spec.name} stream in its consumer group: {spec.description}."
    args = build_parser(prog, description, spec.processor).parse_args(argv)
    options = WorkerOptions.from_args(args, args.consumer or default_consumer_name())
    return run(options, spec)


def main(argv: list[str] | None = None) -> int:
    """``python -m sentinel_platform.workers <stream> [options]``."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0].startswith("-"):
        names = ", ".join(spec.name for spec in stream_specs())
        print(
            "usage: python -m sentinel_platform.workers STREAM [options]\n"
            f"STREAM is a declared stream: {names} (and those of SENTINEL_STREAM_MODULES); "
            "STREAM --help lists the options",
            file=sys.stderr,
        )
        return 0 if args[:1] in (["-h"], ["--help"]) else EXIT_USAGE
    return run_worker(args[0], args[1:])
