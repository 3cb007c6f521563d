"""The publisher resource never carries a Redis password in its config.

Resource config is shown in the Dagster UI (the Resources page lists every configured
value) and run config is stored with every run, so the password reaches the resource
only through the settings (``REDIS_URL``, read as a secret). Checked on what the UI
itself reads: the GraphQL API over code locations loaded out of process from a
workspace file, like ``dagster dev`` loads them.
"""

from __future__ import annotations

import json
from pathlib import Path

import dagster as dg
import pytest

from sentinel_platform.redis_server import RedisServer
from sentinel_platform.resources.redis_publisher import (
    PasswordInConfigError,
    RedisPublisherResource,
)
from sentinel_platform_tests.harness.secret_config import (
    PROBE_KEY,
    REPO_ROOT,
    SECRET,
    failed_run_text,
    load_error_messages,
    password_url,
    probe_marker,
    query_locations,
    write_workspace,
)

#: The shapes a password takes in a Redis URL (redis-py honours ``?password=``).
PASSWORD_URLS = {
    "password-only": f"redis://:{SECRET}@127.0.0.1:6399/0",
    "user-and-password": f"redis://app:{SECRET}@127.0.0.1:6399/0",
    "query-string": f"redis://127.0.0.1:6399/0?password={SECRET}",
    "cluster": f"redis+cluster://app:{SECRET}@127.0.0.1:7000",
}
PROBE_LOCATION = """
import dagster as dg

from sentinel_platform.resources.redis_publisher import RedisPublisherResource

# Apart from the line that fails, as in a config module: a traceback quotes that line.
URL = {url!r}


@dg.asset
def probe(redis_publisher: RedisPublisherResource) -> None:
    redis_publisher.connect().ping()


defs = dg.Definitions(
    assets=[probe], resources={{"redis_publisher": RedisPublisherResource(redis_url=URL)}}
)
"""


def test_the_code_location_shows_no_password_of_redis_url_in_any_resource(
    settings_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REDIS_URL", PASSWORD_URLS["user-and-password"])
    with dg.instance_for_test() as instance:
        shown = query_locations(REPO_ROOT / "workspace.yaml", instance)
    location = shown["sentinel_platform"]
    assert location["load"]["__typename"] == "RepositoryLocation", location["load"]
    names = {r["name"] for r in location["resources"]["results"]}
    assert "redis_publisher" in names
    assert SECRET not in json.dumps(shown)


def test_a_location_putting_a_password_in_the_publisher_config_fails_to_load_naming_the_field(
    settings_env: dict[str, str], tmp_path: Path
) -> None:
    workspace = write_workspace(
        tmp_path, {name: PROBE_LOCATION.format(url=url) for name, url in PASSWORD_URLS.items()}
    )

    with dg.instance_for_test() as instance:
        shown = query_locations(workspace, instance)

    assert SECRET not in json.dumps(shown)
    assert sorted(shown) == sorted(PASSWORD_URLS)
    for name, location in shown.items():
        assert location["load"]["__typename"] == "PythonError", (name, location)
        messages = load_error_messages(location)
        assert any("redis_url" in m and "REDIS_URL" in m for m in messages), (name, messages)


@pytest.mark.parametrize("url", PASSWORD_URLS.values(), ids=PASSWORD_URLS.keys())
def test_a_password_in_redis_url_is_refused_without_showing_it(url: str) -> None:
    with pytest.raises(PasswordInConfigError) as caught:
        RedisPublisherResource(redis_url=url)
    assert "REDIS_URL" in str(caught.value)
    assert SECRET not in f"{caught.value!r} {caught.value}"
    assert caught.value.__cause__ is None and caught.value.__context__ is None


@pytest.mark.parametrize(
    "url", ["redis://127.0.0.1:6399/0", "redis://app@127.0.0.1:6399/3", "rediss://h:6380"]
)
def test_a_redis_url_without_a_password_is_accepted(url: str) -> None:
    assert RedisPublisherResource(redis_url=url).redis_url == url


def test_a_run_with_the_password_in_its_run_config_fails_before_connecting(
    password_redis: RedisServer, dagster_instance: dg.DagsterInstance
) -> None:
    url = password_url(password_redis)

    @dg.asset
    def probe(redis_publisher: RedisPublisherResource) -> None:
        redis_publisher.connect().set(PROBE_KEY, "reached")

    shown = failed_run_text(
        dagster_instance,
        [probe],
        {"redis_publisher": RedisPublisherResource()},
        {"resources": {"redis_publisher": {"config": {"redis_url": url}}}},
    )
    assert "redis_url" in shown and "REDIS_URL" in shown
    assert SECRET not in shown
    assert probe_marker(password_redis) is None


def test_the_password_reaches_the_publisher_from_redis_url_in_the_environment(
    password_redis: RedisServer,
    dagster_instance: dg.DagsterInstance,
    settings_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REDIS_URL", password_url(password_redis))

    @dg.asset
    def probe(redis_publisher: RedisPublisherResource) -> None:
        redis_publisher.connect().set(PROBE_KEY, "reached")

    result = dg.materialize(
        [probe], resources={"redis_publisher": RedisPublisherResource()}, instance=dagster_instance
    )
    assert result.success
    assert probe_marker(password_redis) == b"reached"
