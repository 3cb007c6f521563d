"""A server that requires a password is reported in the operator's terms, naming the
setting (REDIS_URL) and never the password, by every entry point: ``sentinel status``,
``sentinel dlq``, ``sentinel up`` and the worker; not with Redis's own ``HELLO must be
called ...``, ``NOAUTH`` or ``WRONGPASS`` text."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from sentinel_platform.exit_codes import EXIT_ERROR, EXIT_USAGE
from sentinel_platform.redis_server import RedisServer
from sentinel_platform_tests.harness.cli import run_sentinel
from sentinel_platform_tests.harness.processes import child_env

PASSWORD = "s3cret-server-pw"
WRONG = "not-the-pw-123"
RAW_REPLIES = ("HELLO must be called", "NOAUTH", "WRONGPASS", "username-password pair")
EXPECTED = {
    None: "this server requires a password (REDIS_URL)",
    WRONG: "the server refused the password (REDIS_URL)",
}
COMMANDS = [
    ["status"],
    ["status", "--json"],
    ["dlq", "list", "--stream", "axioms"],
    ["dlq", "replay", "--all", "--dry-run"],
    ["up", "--no-dagster", "--transaction-workers", "0", "--axiom-workers", "0"],
]


@pytest.fixture(scope="module")
def locked_redis(redis_binary: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A real redis-server started with ``requirepass``; yields its port's address."""
    server = RedisServer(
        redis_binary, tmp_path_factory.mktemp("locked"), config={"requirepass": PASSWORD}
    ).start()
    yield f"127.0.0.1:{server.port}"
    server.stop()


def _url(address: str, password: str | None) -> str:
    return f"redis://{'' if password is None else f':{password}@'}{address}/0"


def _check(output: str, password: str | None) -> None:
    assert EXPECTED[password] in output, output
    for raw in RAW_REPLIES:
        assert raw not in output
    for secret in (PASSWORD, WRONG):
        assert secret not in output
    assert "Traceback" not in output


@pytest.mark.parametrize("password", [None, WRONG], ids=["no-password", "wrong-password"])
@pytest.mark.parametrize("argv", COMMANDS, ids=[" ".join(c[:2]) for c in COMMANDS])
def test_sentinel_says_the_server_needs_a_password_or_refused_it(
    locked_redis: str, tmp_path: Path, password: str | None, argv: list[str]
) -> None:
    env = child_env(_url(locked_redis, password), tmp_path / "home")
    result = run_sentinel(env, *argv)
    assert result.code == EXIT_ERROR, (result.out, result.err)
    _check(result.out + result.err, password)


@pytest.mark.parametrize("password", [None, WRONG], ids=["no-password", "wrong-password"])
def test_the_worker_says_the_server_needs_a_password_or_refused_it(
    locked_redis: str, tmp_path: Path, password: str | None
) -> None:
    env = child_env(_url(locked_redis, password), tmp_path / "home")
    proc = subprocess.run(
        [sys.executable, "-m", "sentinel_platform.workers", "transactions"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == EXIT_USAGE, proc.stderr
    _check(proc.stdout + proc.stderr, password)
