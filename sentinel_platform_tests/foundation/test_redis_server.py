"""Real Redis: embedded server lifecycle, persistence, version gate, authenticated URLs."""

from __future__ import annotations

import logging
import stat
from pathlib import Path

import pytest
import redis

from sentinel_platform.redis_server import (
    RedisServer,
    RedisServerError,
    ensure_embedded,
    find_redis_server,
    running_embedded_url,
    stop_embedded,
)
from sentinel_platform.settings import load_settings
from sentinel_platform.streams.connection import RedisConnectError, connect


def test_fixture_server_is_real_and_flushed(redis_client: redis.Redis) -> None:
    assert redis_client.ping()
    assert redis_client.dbsize() == 0
    assert redis_client.info("server")["redis_version"] >= "6.2"


def test_embedded_server_starts_is_shared_and_persists_across_restart(tmp_path: Path) -> None:
    settings = load_settings(home=tmp_path / "home")
    url, started = ensure_embedded(settings)
    try:
        assert started
        assert url.startswith("redis://127.0.0.1:")
        assert ensure_embedded(settings) == (url, False)  # a second process shares it
        client = connect(settings)
        assert client.ping()
        client.set("survives", "restart")
        client.close()
    finally:
        assert stop_embedded(settings)
    assert running_embedded_url(settings) is None
    assert (tmp_path / "home" / "redis" / "appendonlydir").exists()

    url_again, started_again = ensure_embedded(settings)
    try:
        assert started_again
        assert url_again == url  # same port, same data directory
        assert redis.Redis.from_url(url_again, decode_responses=True).get("survives") == "restart"
    finally:
        stop_embedded(settings)


def _fake_old_binary(tmp_path: Path, version: str) -> str:
    script = tmp_path / "redis-server"
    script.write_text(f"#!/bin/sh\necho 'Redis server v={version} sha=0 malloc=libc bits=64'\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def test_too_old_server_binary_is_refused(tmp_path: Path) -> None:
    settings = load_settings(home=tmp_path, redis_server=_fake_old_binary(tmp_path, "6.0.16"))
    with pytest.raises(RedisServerError, match=r"Redis 6\.0\.16.*needs Redis 6\.2\.0"):
        find_redis_server(settings)


def test_server_version_is_checked_at_connect(redis_server: RedisServer, tmp_path: Path) -> None:
    settings = load_settings(redis_url=redis_server.url, home=tmp_path)
    client = connect(settings)
    version = client.info("server")["redis_version"]
    assert tuple(int(p) for p in version.split(".")[:2]) >= (6, 2)


def test_password_url_works_and_password_never_logged(
    redis_binary: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server = RedisServer(
        redis_binary, tmp_path / "auth", config={"requirepass": "hunter2-secret"}
    ).start()
    try:
        good = load_settings(
            redis_url=f"redis://:hunter2-secret@127.0.0.1:{server.port}/0", home=tmp_path
        )
        assert connect(good).ping()
        assert "hunter2-secret" not in repr(good)

        bad = load_settings(redis_url=f"redis://:wrong-pw@127.0.0.1:{server.port}/0", home=tmp_path)
        with pytest.raises(RedisConnectError) as error:
            connect(bad)
        assert "rejected the credentials" in str(error.value)
        assert "wrong-pw" not in str(error.value)
        assert "hunter2-secret" not in caplog.text
        assert "wrong-pw" not in caplog.text
    finally:
        server.stop()


def test_unreachable_server_fails_clearly(tmp_path: Path) -> None:
    from sentinel_platform.redis_server import free_port

    settings = load_settings(redis_url=f"redis://u:pw-xyz@127.0.0.1:{free_port()}/0", home=tmp_path)
    with pytest.raises(RedisConnectError) as error:
        connect(settings)
    assert "cannot reach Redis" in str(error.value)
    assert "pw-xyz" not in str(error.value)
