"""Shared fixtures: a real redis-server, a real local SparkSession, a real Dagster instance.

Nothing here is a fake. The Redis server is a throw-away ``redis-server`` process on a
free port for the whole test session, flushed before each test; Spark is ``local[2]``
with the UI off; Dagster uses a temporary on-disk instance.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("GX_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DAGSTER_DISABLE_TELEMETRY", "1")
# Spark's Python workers must run this interpreter (the venv), or executors cannot import
# redis or sentinel_platform.
os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
# Tests configure settings explicitly; a developer's REDIS_URL must not leak in. Only
# SENTINEL_REDIS_SERVER stays: it picks the server binary the whole suite runs on (CI runs
# the Redis-facing tests once more with SENTINEL_REDIS_SERVER=/usr/bin/redis-server).
_KEPT = {"SENTINEL_REDIS_SERVER"}
for _name in [n for n in os.environ if n.startswith("SENTINEL_") or n == "REDIS_URL"]:
    if _name not in _KEPT:
        del os.environ[_name]

from sentinel_platform.redis_server import RedisServer, find_redis_server  # noqa: E402
from sentinel_platform.settings import Settings, load_settings  # noqa: E402
from sentinel_platform.streams.plumbing.connection import RedisClient, connect  # noqa: E402

# The one poll with a deadline is the harness's; tests import it from here too.
from sentinel_platform_tests.harness.waits import wait_until as wait_until  # noqa: E402


@pytest.fixture(scope="session")
def redis_binary() -> str:
    return find_redis_server(load_settings())


@pytest.fixture(scope="session")
def redis_server(
    redis_binary: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[RedisServer]:
    server = RedisServer(redis_binary, tmp_path_factory.mktemp("redis")).start()
    yield server
    server.stop()


@pytest.fixture
def sentinel_home(tmp_path: Path) -> Path:
    return tmp_path / "sentinel-home"


@pytest.fixture
def make_settings(redis_server: RedisServer, sentinel_home: Path) -> Callable[..., Settings]:
    """Settings pointing at the test server; keyword overrides use field names."""

    def factory(**overrides: Any) -> Settings:
        values: dict[str, Any] = {"redis_url": redis_server.url, "home": sentinel_home}
        values.update(overrides)
        return load_settings(**values)

    return factory


@pytest.fixture
def settings(make_settings: Callable[..., Settings]) -> Settings:
    return make_settings()


@pytest.fixture
def redis_client(settings: Settings) -> Iterator[RedisClient]:
    client = connect(settings)
    client.flushall()
    yield client
    client.close()


@pytest.fixture
def settings_env(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """The test settings as environment variables, for child processes (workers, CLI)."""
    env = {
        "REDIS_URL": settings.redis_url_value,
        "SENTINEL_HOME": str(settings.home_dir),
        "PYTHONUNBUFFERED": "1",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    return {**os.environ, **env}


@pytest.fixture
def eviction_policy(settings: Settings) -> Iterator[Callable[[str], None]]:
    """``eviction_policy("allkeys-lru")`` sets the session server's ``maxmemory-policy``.

    The session server is shared by every test of this process, so the policy goes back to
    ``noeviction`` (the server's default) after the test, whether it passed or not.
    """
    client = connect(settings)

    def set_policy(policy: str) -> None:
        client.config_set("maxmemory-policy", policy)

    yield set_policy
    client.config_set("maxmemory-policy", "noeviction")
    client.close()


@pytest.fixture
def policy_hidden_url(settings: Settings) -> Iterator[str]:
    """The session server's URL as an ACL user that may run every command but ``INFO
    memory``: ``INFO server`` (the version check) stays allowed, so it connects, and the
    eviction policy is hidden from it. The user is deleted after the test."""
    user, password = f"policy-hidden-{os.getpid()}", "hidden-policy-pw"
    client = connect(settings)
    client.execute_command(
        "ACL", "SETUSER", user, "reset", "on", f">{password}", "~*", "&*", "+@all", "-info"
    )
    client.execute_command("ACL", "SETUSER", user, "+info|server")
    yield settings.redis_url_value.replace("redis://", f"redis://{user}:{password}@", 1)
    client.execute_command("ACL", "DELUSER", user)
    client.close()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """A real local SparkSession shared by the session's Spark tests."""
    pyspark_sql = pytest.importorskip("pyspark.sql")
    session = (
        pyspark_sql.SparkSession.builder.master("local[2]")
        .appName("sentinel-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.default.parallelism", "2")
        .config("spark.driver.memory", "1g")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    yield session
    session.stop()


@pytest.fixture
def dagster_instance(tmp_path: Path) -> Iterator[Any]:
    """A real, temporary on-disk Dagster instance."""
    import dagster as dg

    home = tmp_path / "dagster"
    home.mkdir(parents=True, exist_ok=True)
    with dg.instance_for_test(temp_dir=str(home)) as instance:
        yield instance


# --- Harness markers (``make test-fast``) ---------------------------------------------------
# Every test gets one marker per harness it uses (spark, dagster, processes, redis), found
# from its fixtures and the helpers it calls: see ``harness/markers.py``.


@pytest.hookimpl(tryfirst=True)  # before ``-m`` deselects by them
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    from sentinel_platform_tests.harness.markers import mark_harnesses

    mark_harnesses(items)
