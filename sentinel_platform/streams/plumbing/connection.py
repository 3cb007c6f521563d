"""Connecting to Redis: one function every process uses.

It resolves where Redis is (``REDIS_URL`` or the embedded server), picks the single or
cluster client, retries transient errors with backoff, and checks the server version
once (Redis 7.0+ or Valkey: the lag comes from the group's ``lag``/``entries-read``).
URLs are only ever logged redacted.

A command refused with READONLY (a primary demoted behind the same address) is re-sent
by redis-py on a fresh connection, which reaches whatever primary answers there now;
:func:`reset_connections` drops every kept connection (and a cluster's slot map) when
the worker loop meets a failover or resharding error.
"""

from __future__ import annotations

import functools
import logging
from typing import Any
from urllib.parse import urlsplit

import redis
from redis.backoff import ExponentialBackoff
from redis.cluster import RedisCluster
from redis.exceptions import (
    AskError,
    ClusterDownError,
    ClusterError,
    MovedError,
    ReadOnlyError,
    RedisClusterException,
    TryAgainError,
)
from redis.retry import Retry

from sentinel_platform.redaction import scrub
from sentinel_platform.redis_server import (
    RedisServerError,
    ensure_embedded,
    parse_version,
    require_version,
)
from sentinel_platform.settings import Settings, redact_url
from sentinel_platform.streams.plumbing.undecodable import ENCODING_ERRORS

log = logging.getLogger(__name__)


class ClusterClient(RedisCluster):
    """redis-py's cluster client, with pipelines that may carry EVALSHA.

    redis-py blocks ``evalsha`` on cluster pipelines, yet routes an EVALSHA correctly by
    its KEYS (and refuses keys of different slots). The streams core queues its atomic
    scripts (commit, dead letter) in pipelines to save a round trip per message; every key
    of a call shares the stream's hash slot (``keys.py``), the scripts are loaded on every
    primary (SCRIPT LOAD goes to all of them) and reloaded on NOSCRIPT. So the same code
    runs on one server and on a cluster.
    """

    def pipeline(self, transaction: Any = None, shard_hint: Any = None) -> Any:
        # redis-py leaves RedisCluster.pipeline unannotated (untyped_calls_exclude does not
        # reach a call through super()).
        pipe = super().pipeline(  # type: ignore[no-untyped-call]
            transaction=transaction, shard_hint=shard_hint
        )
        pipe.evalsha = functools.partial(pipe.execute_command, "EVALSHA")
        return pipe


RedisClient = redis.Redis | RedisCluster
TRANSIENT_ERRORS = (redis.ConnectionError, redis.TimeoutError)
#: The server behind the address or the cluster's shape changed: a replica promoted behind
#: the same address (the old primary answers READONLY), slots moving or not covered, the
#: cluster down during a failover (MOVED: a command sent once, outside the client's own
#: redirection, to a node that no longer owns the slot). Kept connections and the slot
#: map are then stale.
FAILOVER_ERRORS = (
    ReadOnlyError,
    MovedError,
    ClusterError,
    RedisClusterException,
    AskError,
    TryAgainError,
)
#: Errors after which a command surely did not run, so redis-py may resend it on a fresh
#: connection (READONLY: a write refused by a demoted primary).
RESEND_ERRORS = [*TRANSIENT_ERRORS, ReadOnlyError]


class RedisConnectError(RuntimeError):
    """Redis cannot be reached, rejects the credentials, or is too old."""


def resolve_url(settings: Settings) -> str:
    """The configured URL, or the embedded server's (started on first use)."""
    if settings.redis_url_value:
        return settings.redis_url_value
    url, started = ensure_embedded(settings)
    if started:
        log.info("embedded redis started", extra={"url": url})
    return url


def server_version(client: RedisClient) -> tuple[int, int, int]:
    if isinstance(client, RedisCluster):
        # Ask every node ({node: info}); the oldest one decides. Without target_nodes
        # redis-py asks one random node and returns its flat info dict.
        per_node = client.info("server", target_nodes=RedisCluster.ALL_NODES)
        infos = per_node.values() if "redis_version" not in per_node else [per_node]
        return min(parse_version(info["redis_version"]) for info in infos)
    return parse_version(client.info("server")["redis_version"])


def _plain_url(url: str) -> str:
    return url.replace("+cluster://", "://", 1)


def connect(settings: Settings, url: str | None = None, check: bool = True) -> RedisClient:
    """A client with retries, decoded responses and a verified server version."""
    target = url or resolve_url(settings)
    socket_timeout = max(settings.redis_socket_timeout_s, settings.block_ms / 1000 + 5)
    common = {
        "decode_responses": True,
        # A foreign entry's bytes that are not UTF-8 must not fail a read: see undecodable.py.
        "encoding_errors": ENCODING_ERRORS,
        "socket_timeout": socket_timeout,
        "socket_connect_timeout": 5,
        "retry": Retry(ExponentialBackoff(cap=2.0, base=0.05), retries=3),
        "health_check_interval": 30,
    }
    try:
        if settings.is_cluster or "+cluster://" in target:
            client: RedisClient = ClusterClient.from_url(_plain_url(target), **common)
        else:
            client = redis.Redis.from_url(target, retry_on_error=RESEND_ERRORS, **common)
        if check:
            require_version(server_version(client), f"the server at {redact_url(target)}")
    except RedisServerError as exc:
        raise RedisConnectError(str(exc)) from None
    except (RedisClusterException, ClusterDownError) as exc:
        raise cluster_connect_error(exc, redact_url(target)) from None
    except redis.exceptions.NoPermissionError as exc:
        raise RedisConnectError(
            f"Redis at {redact_url(target)} accepted the user but denies a command the platform "
            f"needs ({exc}); see README 'Redis ACL' for the required permissions"
        ) from None
    except (redis.AuthenticationError, redis.exceptions.AuthorizationError) as exc:
        reading = auth_problem(exc, target) or scrub(str(exc))
        raise RedisConnectError(
            f"Redis at {redact_url(target)} rejected the credentials: {reading}"
        ) from None
    except redis.ResponseError as exc:
        problem = auth_problem(exc, target)
        if problem is not None:
            raise RedisConnectError(
                f"Redis at {redact_url(target)} rejected the credentials: {problem}"
            ) from None
        if "NOPERM" in str(exc):
            raise RedisConnectError(
                f"Redis at {redact_url(target)} rejected the credentials: {exc}"
            ) from None
        raise
    except TRANSIENT_ERRORS as exc:
        raise RedisConnectError(f"cannot reach Redis at {redact_url(target)}: {exc}") from None
    return client


NEEDS_PASSWORD = "this server requires a password (REDIS_URL)"
REFUSED_PASSWORD = "the server refused the password (REDIS_URL)"
#: What a server says when a connection must authenticate first (no password sent).
_NEEDS_PASSWORD = ("NOAUTH", "HELLO must be called", "Authentication required")
#: What a server says when it refuses the password (or user) that was sent.
_REFUSED_PASSWORD = ("WRONGPASS", "invalid username-password pair", "invalid password")


def auth_problem(exc: BaseException, url: str) -> str | None:
    """The operator's reading of an authentication failure, or None for any other error.

    Redis answers a client that sent no password with ``NOAUTH`` or (RESP3) ``HELLO must
    be called with the client already authenticated``, and a wrong one with ``WRONGPASS``;
    none of that says where the password goes. The reading names the setting instead, and
    never the password. A bare authentication error is read by whether ``url`` carries one.
    """
    text = str(exc)
    if any(marker in text for marker in _REFUSED_PASSWORD):
        return REFUSED_PASSWORD
    if any(marker in text for marker in _NEEDS_PASSWORD):
        return NEEDS_PASSWORD
    if not isinstance(exc, redis.AuthenticationError):
        return None
    try:
        sent_password = urlsplit(_plain_url(url)).password is not None
    except ValueError:
        sent_password = "@" in url
    return REFUSED_PASSWORD if sent_password else NEEDS_PASSWORD


def cluster_connect_error(exc: BaseException, where: str) -> RedisConnectError:
    """What a cluster client's start-up failure means, as the single-server errors say it.

    redis-py wraps every seed's failure in one ``RedisClusterException`` whose cause is the
    last seed's own error; that cause decides. Unreachable seeds and a cluster not (yet)
    serving every slot are outages ("cannot reach", which a worker retries with backoff,
    so a cluster coming up later is joined); refused credentials or a seed that is not a
    cluster node are configuration errors. The text is scrubbed: it may quote an address.
    """
    cause = exc.__cause__
    # First: redis-py's AuthenticationError is a ConnectionError, yet retrying cannot help.
    problem = auth_problem(cause or exc, where)
    if problem is not None:
        return RedisConnectError(f"Redis at {where} rejected the credentials: {problem}")
    if isinstance(cause, redis.exceptions.AuthorizationError):
        return RedisConnectError(f"Redis at {where} rejected the credentials: {scrub(str(cause))}")
    if isinstance(cause, TRANSIENT_ERRORS):
        return RedisConnectError(f"cannot reach Redis at {where}: {scrub(str(cause))}")
    if isinstance(cause, RedisClusterException):
        return cluster_connect_error(cause, where)
    text = scrub(str(cause or exc))
    if "Cluster mode is not enabled" in text:
        return RedisConnectError(
            f"Redis at {where} is not a cluster node (cluster mode is disabled): use a "
            "redis:// URL for a single server, redis+cluster:// only for a Redis Cluster"
        )
    if "slots are not covered" in text or isinstance(exc, ClusterDownError):
        return RedisConnectError(f"cannot reach Redis at {where}: the cluster is down ({text})")
    return RedisConnectError(f"the Redis Cluster at {where} cannot be used: {text}")


def reset_connections(client: RedisClient) -> None:
    """Forget every kept connection (and a cluster's slot map) after a failover error.

    The next command connects afresh: through the same address to whatever primary now
    answers there, or, on a cluster, to the primaries the refreshed slot map names.
    """
    if isinstance(client, RedisCluster):
        for node in client.get_nodes():
            if node.redis_connection is not None:
                node.redis_connection.connection_pool.disconnect()
        client.nodes_manager.initialize()
    else:
        client.connection_pool.disconnect()
