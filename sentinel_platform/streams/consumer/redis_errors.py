"""One policy for every error a worker meets while it talks to Redis: what it means.

The consumer acts on the :data:`Action` (``Consumer._recover_from``); nothing else in it
inspects an exception's type, so a new kind of error is taught here, once, and
table-tested (``test_redis_errors.py``).

* ``failover``: the server behind the address or the cluster's shape changed (READONLY,
  MOVED, cluster down): kept connections and the slot map are dropped, then backoff.
* ``outage``: Redis unreachable or timing out, or refusing for now (OOM, a key of the
  wrong type, a busy script): buffered outcomes are kept, backoff, try again.
* ``heal``: the consumer group vanished under us (NOGROUP): recreate it at id 0.
* ``refused``: a refusal no wait can change (an ACL denying a command, a command the
  server does not know): start-up stops with exit status 2.
* ``bug``: anything else (here or in a plug-in): logged with its traceback, the pass's
  messages are decided again later; no single message ends the process.
"""

from __future__ import annotations

from typing import Literal

import redis

from sentinel_platform.streams.plumbing.connection import FAILOVER_ERRORS, TRANSIENT_ERRORS

Action = Literal["failover", "outage", "heal", "refused", "bug"]


def is_configuration_error(exc: redis.ResponseError) -> bool:
    """A refusal of the command itself, not of its data or the server's state right now."""
    if isinstance(exc, redis.exceptions.NoPermissionError):
        return True
    return "unknown command" in str(exc).lower()


def classify(exc: BaseException) -> Action:
    """What ``exc``, raised by a Redis call of the worker, means (see the module doc)."""
    if isinstance(exc, FAILOVER_ERRORS):
        return "failover"
    if isinstance(exc, TRANSIENT_ERRORS):
        return "outage"
    if isinstance(exc, redis.ResponseError):
        if "NOGROUP" in str(exc):
            return "heal"
        if is_configuration_error(exc):
            return "refused"
        return "outage"
    return "bug"


def is_redis_error(exc: BaseException) -> bool:
    """Raised by Redis or the client talking to it (not by the worker's own code)."""
    return isinstance(exc, (redis.RedisError, *FAILOVER_ERRORS))
