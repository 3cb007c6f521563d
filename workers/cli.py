"""Command-line options shared by every worker entry point."""

from __future__ import annotations

import argparse
import os
import socket

from sentinel_platform.logs import LOG_LEVELS


def default_consumer_name() -> str:
    """hostname-pid: unique per process, and readable in XINFO CONSUMERS."""
    return f"{socket.gethostname()}-{os.getpid()}"


def positive(value: str) -> int:
    number = int(value)
    if number < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive integer")
    return number


def non_negative(value: str) -> int:
    number = int(value)
    if number < 0:
        raise argparse.ArgumentTypeError(f"{value} is negative")
    return number


def build_parser(prog: str, description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=description)
    parser.add_argument(
        "--consumer",
        default=None,
        help="consumer name in the group (default: hostname-pid, unique per process)",
    )
    parser.add_argument(
        "--count", type=positive, default=None, help="batch size of each read (SENTINEL_READ_COUNT)"
    )
    parser.add_argument(
        "--block-ms",
        type=non_negative,
        default=None,
        help="longest a read blocks waiting for new messages (SENTINEL_BLOCK_MS)",
    )
    parser.add_argument(
        "--simulate-latency-ms",
        type=non_negative,
        default=None,
        help="extra processing time per message, for demos and backpressure tests",
    )
    parser.add_argument(
        "--metrics-port",
        type=non_negative,
        default=None,
        help="serve Prometheus metrics on 127.0.0.1:PORT (0 picks a free port)",
    )
    parser.add_argument("--log-level", default="INFO", type=str.upper, choices=LOG_LEVELS)
    return parser
