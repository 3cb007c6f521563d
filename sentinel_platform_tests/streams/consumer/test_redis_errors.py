"""The one policy from a Redis error to what the worker does about it (``classify``)."""

from __future__ import annotations

import pytest
import redis
from redis.exceptions import ClusterDownError, MovedError, ReadOnlyError

from sentinel_platform.streams.consumer.redis_errors import classify, is_redis_error


@pytest.mark.parametrize(
    ("error", "action"),
    [
        (redis.ConnectionError("Connection refused"), "outage"),
        (redis.TimeoutError("Timeout reading from socket"), "outage"),
        (ReadOnlyError("You can't write against a read only replica."), "failover"),
        (MovedError("3999 127.0.0.1:6381"), "failover"),
        (ClusterDownError("The cluster is down"), "failover"),
        (redis.ResponseError("NOGROUP No such key 'transactions' or consumer group"), "heal"),
        (redis.exceptions.NoPermissionError("NOPERM this user has no permissions"), "refused"),
        (redis.ResponseError("ERR unknown command 'XAUTOCLAIM'"), "refused"),
        (redis.ResponseError("OOM command not allowed when used memory > 'maxmemory'"), "outage"),
        (redis.ResponseError("WRONGTYPE Operation against a key holding the wrong kind"), "outage"),
        (redis.ResponseError("BUSY Redis is busy running a script"), "outage"),
        (ValueError("a bug in a plug-in"), "bug"),
        (KeyError("missing"), "bug"),
    ],
)
def test_every_error_maps_to_one_action(error: Exception, action: str) -> None:
    assert classify(error) == action


@pytest.mark.parametrize(
    ("error", "from_redis"),
    [
        (redis.ConnectionError("gone"), True),
        (redis.ResponseError("OOM"), True),
        (ReadOnlyError("replica"), True),
        (ValueError("bug"), False),
    ],
)
def test_redis_errors_are_told_from_the_workers_own(error: Exception, from_redis: bool) -> None:
    assert is_redis_error(error) is from_redis
