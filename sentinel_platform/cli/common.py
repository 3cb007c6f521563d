"""What every ``sentinel`` subcommand shares: settings, the Redis connection, errors.

The exit codes are :mod:`sentinel_platform.exit_codes`' (one module for every process);
:data:`ZONE_EXIT` maps a lag zone to ``sentinel status``' exit code.
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

from sentinel_platform.exit_codes import (
    EXIT_BACKPRESSURE,
    EXIT_ELEVATED,
    EXIT_ERROR,
    EXIT_OK,
    EXIT_USAGE,
    EXIT_WORKER_OFF,
)
from sentinel_platform.redis_server import RedisServerError, running_embedded_url
from sentinel_platform.registry import UnknownStreamError, resolve_stream
from sentinel_platform.settings import Settings, SettingsError, load_settings
from sentinel_platform.streams.plumbing.connection import RedisClient, RedisConnectError, connect

ZONE_EXIT = {
    "nominal": EXIT_OK,
    "elevated": EXIT_ELEVATED,
    "backpressure": EXIT_BACKPRESSURE,
    "worker_off": EXIT_WORKER_OFF,
}

_COLOURS = {"nominal": "32", "elevated": "33", "backpressure": "31", "worker_off": "35"}


class CliError(RuntimeError):
    """A failure to report as one clear line on stderr (exit code ``code``)."""

    def __init__(self, message: str, code: int = EXIT_ERROR) -> None:
        super().__init__(message)
        self.code = code


def settings_from_env() -> Settings:
    try:
        return load_settings()
    except SettingsError as exc:
        raise CliError(str(exc)) from None


def open_client(settings: Settings) -> RedisClient:
    """A client for the configured Redis. Without ``REDIS_URL`` it joins the running
    embedded server but never starts one: an inspection command must not have the side
    effect of bringing up an empty Redis and then reporting on it."""
    url = settings.redis_url_value or running_embedded_url(settings)
    if not url:
        raise CliError(
            f"the embedded Redis of {settings.home_dir} is not running: start the platform "
            "with `sentinel up`, or set REDIS_URL"
        )
    try:
        return connect(settings, url=url)
    except (RedisConnectError, RedisServerError) as exc:
        raise CliError(str(exc)) from None


def stream_option(settings: Settings, value: str, option: str = "--stream") -> str:
    """The Redis key of the stream an option names, by its registry name (``axioms``) or
    its key (``synapse:axioms``); an unknown name is a usage error listing the declared
    streams, never a filter that silently matches nothing."""
    try:
        return resolve_stream(value, settings).stream_key(settings)
    except (UnknownStreamError, ValueError) as exc:
        raise CliError(f"{option} {exc}", code=EXIT_USAGE) from None


def paint(text: str, zone: str, stream: TextIO) -> str:
    """ANSI colour for a zone name, only when writing to a terminal."""
    if not stream.isatty() or zone not in _COLOURS:
        return text
    return f"\033[{_COLOURS[zone]}m{text}\033[0m"


def print_json(value: Any, stream: TextIO | None = None) -> None:
    out = stream or sys.stdout
    out.write(json.dumps(value, indent=2, default=str) + "\n")


def human_ms(ms: int | None) -> str:
    if ms is None:
        return "-"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f}s"
    if seconds < 3600:
        return f"{seconds / 60:.1f}m"
    return f"{seconds / 3600:.1f}h"
