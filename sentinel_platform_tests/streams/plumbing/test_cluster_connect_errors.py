"""How a cluster client's start-up failure is told: an outage to retry, or a fatal error.

The worker retries only "cannot reach" errors (an unreachable seed, a cluster not serving
every slot yet) and stops on the others; the text never shows a password.
"""

from __future__ import annotations

import pytest
import redis
from redis.exceptions import ClusterDownError, RedisClusterException

from sentinel_platform.streams.plumbing.connection import cluster_connect_error

WHERE = "redis+cluster://app:***@127.0.0.1:7000/0"
SECRET = "pw-in-text-3"


def wrapped(cause: BaseException) -> RedisClusterException:
    """What redis-py raises: its own exception, caused by the last seed's error."""
    exc = RedisClusterException(f"Redis Cluster cannot be connected: {cause}")
    exc.__cause__ = cause
    return exc


CASES = {
    "refused": (wrapped(redis.ConnectionError("Error 111 connecting")), "cannot reach Redis"),
    "timeout": (wrapped(redis.TimeoutError("Timeout connecting")), "cannot reach Redis"),
    "slots-not-covered": (
        RedisClusterException("All slots are not covered after query all startup_nodes."),
        "cannot reach Redis",
    ),
    "cluster-down": (ClusterDownError("CLUSTERDOWN The cluster is down"), "cannot reach Redis"),
    "wrong-password": (
        wrapped(redis.AuthenticationError("invalid username-password pair")),
        "rejected the credentials",
    ),
    "noauth": (
        wrapped(redis.ResponseError("NOAUTH Authentication required.")),
        "rejected the credentials",
    ),
    "not-a-cluster": (
        wrapped(RedisClusterException("Cluster mode is not enabled on this node")),
        "is not a cluster node",
    ),
    "other": (
        RedisClusterException(f"odd failure at redis://u:{SECRET}@10.0.0.1:7001"),
        "cannot be used",
    ),
}


@pytest.mark.parametrize("case", CASES)
def test_a_cluster_start_up_failure_is_named_and_classified(case: str) -> None:
    exc, expected = CASES[case]
    error = cluster_connect_error(exc, WHERE)
    assert expected in str(error)
    assert WHERE in str(error)
    assert SECRET not in str(error)
    assert str(error).startswith("cannot reach") == (expected == "cannot reach Redis")
