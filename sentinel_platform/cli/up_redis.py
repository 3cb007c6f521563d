"""The Redis ``sentinel up`` starts first: embedded unless ``REDIS_URL``, checked before use.

Everything needs Redis, so it comes first and goes last. Without ``REDIS_URL`` the
embedded server is started (or found running) under the home folder, and only a server
this command started is stopped by it. Before any worker or Dagster starts, the server
must answer and keep these keys: a ``maxmemory-policy`` that may evict any key is refused
here once, rather than by every worker one by one.
"""

from __future__ import annotations

import contextlib
import logging

import redis

from sentinel_platform.cli.common import CliError
from sentinel_platform.redis_server import (
    RedisServerError,
    ensure_embedded,
    server_identity,
    stop_embedded,
)
from sentinel_platform.settings import Settings, redact_url
from sentinel_platform.streams.plumbing.connection import (
    RedisClient,
    RedisConnectError,
    connect,
)
from sentinel_platform.streams.plumbing.eviction_policy import server_verdict

log = logging.getLogger("sentinel.up")


def start_redis(settings: Settings) -> bool:
    """Make sure Redis answers; True if this call started the embedded server."""
    started = False
    try:
        if not settings.redis_url_value:
            url, started = ensure_embedded(settings)
            where = f"embedded, data in {settings.home_dir / 'redis'}"
            log.info("redis %s (%s%s)", url, where, "" if started else ", already running")
        else:
            url = settings.redis_url_value
            log.info("redis %s (REDIS_URL)", redact_url(url))
        with connect(settings) as client:
            log.info("redis server: %s", server_identity(client.info("server")))
            check_eviction_policy(client, settings, redact_url(url))
    except (RedisServerError, RedisConnectError, redis.RedisError, CliError) as exc:
        if started:
            stop_embedded(settings)
        raise CliError(str(exc)) from None
    return started


def check_eviction_policy(client: RedisClient, settings: Settings, where: str) -> None:
    """Refuse, before any worker or Dagster starts, a server that may evict any key
    (unless ``SENTINEL_ALLOW_EVICTING_SERVER`` accepts it): the workers would refuse it
    one by one. A warning for a server that may evict keys with a TTL."""
    verdict = server_verdict(client, settings.allow_evicting_server)
    if verdict.refused:
        raise CliError(f"Redis at {where}: {verdict.message}")
    if verdict.level == "ok":
        log.info("redis maxmemory-policy: %s", verdict.policy)
    elif verdict.level == "unknown":
        log.info("note: %s", verdict.message)
    else:
        log.warning("warning: %s", verdict.message)


def stop_started_redis(settings: Settings) -> None:
    """Stop the embedded server this command started; one already gone is no error."""
    log.info("stopping the embedded Redis")
    with contextlib.suppress(RedisServerError, OSError):
        stop_embedded(settings)
