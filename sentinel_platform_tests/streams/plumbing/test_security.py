"""Security basics: a password-protected Redis and a least-privilege ACL user.

The platform must run as an ACL user that can touch only its own keys and no dangerous
command, and a wrong or missing password must stop a worker at once with a clear message,
never with the password in a log line. The ACL below is what the data path needs
(found by running it against ``-@all`` and adding what was denied): stream, string,
hash, list and keyspace commands (DEL, EXPIRE, PTTL, ...), scripting (the atomic commit
and dead-letter scripts), MULTI/EXEC, minus everything ``@dangerous`` (KEYS, FLUSHALL,
CONFIG, ...) except ``INFO``, which is how every client checks the server version at
connect time.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from sentinel_platform.redis_server import RedisServer
from sentinel_platform.settings import Settings, load_settings
from sentinel_platform.streams.plumbing.connection import connect
from sentinel_platform.streams.plumbing.keys import axiom_keys, transaction_keys
from sentinel_platform.streams.producer.backpressure import BackpressureGuard
from sentinel_platform.streams.producer.pacing_limits import BackpressureConfig
from sentinel_platform.streams.producer.publish import (
    axiom_fields,
    publish_rows,
    transaction_fields,
)
from sentinel_platform_tests.harness.processes import Fleet, child_env, wait_leases
from sentinel_platform_tests.harness.strategies import valid_axiom, valid_transaction
from sentinel_platform_tests.harness.waits import wait_until

ADMIN_PASSWORD = "admin-Pw-7f3e9c"
USER = "sentinel"
USER_PASSWORD = "s3ntinel-Pw-91ab"
WRONG_PASSWORD = "not-The-Pw-5521"
#: Keys of a single-server deployment, and the hash-tagged names of cluster mode.
PLATFORM_KEYS = ("~transactions", "~synapse:*", "~sentinel:*", "~{*}*")
PLATFORM_COMMANDS = (
    "-@all",
    "+@stream",
    "+@string",
    "+@hash",
    "+@list",
    "+@sortedset",
    "+@keyspace",
    "+@scripting",
    "+@connection",
    "+@transaction",
    "-@dangerous",
    "+info",
)


@pytest.fixture
def secured_redis(redis_binary: str, tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(
        redis_binary, tmp_path / "redis", config={"requirepass": ADMIN_PASSWORD}
    ).start()
    admin = redis.Redis(port=server.port, password=ADMIN_PASSWORD)
    admin.execute_command(
        "ACL", "SETUSER", USER, "reset", "on", f">{USER_PASSWORD}", *PLATFORM_KEYS,
        *PLATFORM_COMMANDS,
    )  # fmt: skip
    admin.close()
    yield server
    server.stop()


def _url(server: RedisServer, password: str | None) -> str:
    auth = f"{USER}:{password}@" if password is not None else ""
    return f"redis://{auth}127.0.0.1:{server.port}/0"


def _admin(server: RedisServer) -> redis.Redis:
    return redis.Redis(port=server.port, password=ADMIN_PASSWORD, decode_responses=True)


def _settings(server: RedisServer, home: Path, password: str | None) -> Settings:
    return load_settings(redis_url=_url(server, password), home=home)


def test_acl_user_limited_to_platform_keys_runs_workers_and_publish_end_to_end(
    secured_redis: RedisServer, tmp_path: Path
) -> None:
    settings = _settings(secured_redis, tmp_path / "home", USER_PASSWORD)
    client = connect(settings)
    txn_keys, axm_keys = transaction_keys(settings), axiom_keys(settings)
    env = child_env(settings.redis_url_value, settings.home_dir)
    with Fleet(tmp_path) as fleet:
        workers = [
            fleet.worker("transactions", "acl-transactions", env),
            fleet.worker("axioms", "acl-axioms", env),
        ]
        wait_leases(client, txn_keys, workers[:1], timeout_s=30)
        wait_leases(client, axm_keys, workers[1:], timeout_s=30)

        # The publish path (backpressure guard included) as the restricted user.
        for keys, entries in (
            (txn_keys, [transaction_fields(valid_transaction(f"acl-{i}")) for i in range(5)]),
            (axm_keys, [axiom_fields(valid_axiom(f"acl-{i}")) for i in range(5)]),
        ):
            guard = BackpressureGuard(client, keys, BackpressureConfig.from_settings(settings))
            assert publish_rows(client, keys, entries, batch_size=5, guard=guard).rows == 5
        client.xadd(txn_keys.stream, {"data": "{not json"})

        wait_until(lambda: client.xlen(txn_keys.results) == 5, 30)
        wait_until(lambda: client.xlen(axm_keys.results) == 5, 30)
        wait_until(lambda: client.xlen(txn_keys.dlq) == 1, 30)
        assert json.loads(client.xrange(txn_keys.dlq)[0][1]["payload"]) == {"data": "{not json"}
        assert client.llen(txn_keys.recent) == 5
        assert client.get(txn_keys.lag) is not None
        assert [worker.stop() for worker in workers] == [0, 0]
        logs = "".join(worker.log_text() for worker in workers)

    assert USER_PASSWORD not in logs
    assert _admin(secured_redis).acl_log() == [], "the platform hit a permission it lacks"
    # ...and the user really is confined: other keys and dangerous commands are refused.
    with pytest.raises(redis.exceptions.NoPermissionError):
        client.set("someone-else:key", "1")
    with pytest.raises(redis.exceptions.NoPermissionError):
        client.flushall()
    client.close()


@pytest.mark.parametrize(
    ("password", "expected"),
    [(WRONG_PASSWORD, "rejected the credentials"), (None, "rejected the credentials")],
    ids=["wrong-password", "no-password"],
)
def test_worker_with_bad_credentials_fails_fast_with_clear_message_and_no_password_logged(
    secured_redis: RedisServer, tmp_path: Path, password: str | None, expected: str
) -> None:
    settings = _settings(secured_redis, tmp_path / "home", password)
    env = child_env(settings.redis_url_value, settings.home_dir)
    with Fleet(tmp_path) as fleet:
        worker = fleet.worker("transactions", "bad-credentials", env)
        started = time.monotonic()
        wait_until(lambda: not worker.alive(), timeout_s=20)
        elapsed = time.monotonic() - started
        output = worker.log_text()

    assert worker.process.returncode == 2, output
    assert elapsed < 10, f"took {elapsed:.1f}s to give up on bad credentials"
    assert expected in output
    assert "Traceback" not in output
    for secret in (WRONG_PASSWORD, USER_PASSWORD, ADMIN_PASSWORD):
        assert secret not in output
