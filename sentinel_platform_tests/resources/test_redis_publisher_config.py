"""The publisher resource never carries a Redis password in its config.

Resource config is shown in the Dagster UI (the Resources page lists every configured
value) and run config is stored with every run, so the password reaches the resource
only through the settings (``REDIS_URL``, read as a secret). Checked on what the UI
itself reads: the GraphQL API over code locations loaded out of process from a
workspace file, like ``dagster dev`` loads them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import dagster as dg
import pytest
import redis
from dagster_graphql.test.utils import define_out_of_process_context, execute_dagster_graphql

from sentinel_platform.redis_server import RedisServer
from sentinel_platform.resources.redis_publisher import (
    PasswordInConfigError,
    RedisPublisherResource,
)

SECRET = "s3cret-Pw-9"
REPO_ROOT = Path(__file__).resolve().parents[2]
LOCATIONS_QUERY = """
query {
  workspaceOrError {
    ... on Workspace {
      locationEntries {
        name
        locationOrLoadError {
          __typename
          ... on PythonError { message stack errorChain { error { message stack } } }
        }
      }
    }
  }
}
"""
RESOURCES_QUERY = """
query ($selector: RepositorySelector!) {
  allTopLevelResourceDetailsOrError(repositorySelector: $selector) {
    ... on ResourceDetailsList {
      results { name configuredValues { key value type } configFields { name defaultValueAsJson } }
    }
  }
}
"""
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


def _query_locations(workspace: Path, instance: dg.DagsterInstance) -> dict[str, dict[str, Any]]:
    """What the UI reads of each location: its load error, or its resources, as JSON."""
    shown: dict[str, dict[str, Any]] = {}
    with define_out_of_process_context(str(workspace), None, instance) as context:
        entries = execute_dagster_graphql(context, LOCATIONS_QUERY).data["workspaceOrError"]
        for entry in entries["locationEntries"]:
            shown[entry["name"]] = {"load": entry["locationOrLoadError"]}
            if entry["locationOrLoadError"]["__typename"] != "RepositoryLocation":
                continue
            selector = {"repositoryLocationName": entry["name"], "repositoryName": "__repository__"}
            result = execute_dagster_graphql(context, RESOURCES_QUERY, {"selector": selector})
            shown[entry["name"]]["resources"] = result.data["allTopLevelResourceDetailsOrError"]
    return shown


@pytest.fixture
def password_redis(redis_binary: str, tmp_path: Path) -> Iterator[RedisServer]:
    """A real server that refuses every client without the password."""
    server = RedisServer(redis_binary, tmp_path / "redis-pw", config={"requirepass": SECRET})
    yield server.start()
    server.stop()


def test_the_code_location_shows_no_password_of_redis_url_in_any_resource(
    settings_env: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REDIS_URL", PASSWORD_URLS["user-and-password"])
    with dg.instance_for_test() as instance:
        shown = _query_locations(REPO_ROOT / "workspace.yaml", instance)
    location = shown["sentinel_platform"]
    assert location["load"]["__typename"] == "RepositoryLocation", location["load"]
    names = {r["name"] for r in location["resources"]["results"]}
    assert "redis_publisher" in names
    assert SECRET not in json.dumps(shown)


def test_a_location_putting_a_password_in_the_publisher_config_fails_to_load_naming_the_field(
    settings_env: dict[str, str], tmp_path: Path
) -> None:
    workspace = tmp_path / "workspace.yaml"
    entries = []
    for name, url in PASSWORD_URLS.items():
        module = tmp_path / f"location_{name.replace('-', '_')}.py"
        module.write_text(PROBE_LOCATION.format(url=url))
        entries.append(
            f"  - python_file:\n      relative_path: {module.name}\n"
            f"      location_name: {name}\n      working_directory: {REPO_ROOT}\n"
        )
    workspace.write_text("load_from:\n" + "".join(entries))

    with dg.instance_for_test() as instance:
        shown = _query_locations(workspace, instance)

    assert SECRET not in json.dumps(shown)
    assert sorted(shown) == sorted(PASSWORD_URLS)
    for name, location in shown.items():
        assert location["load"]["__typename"] == "PythonError", (name, location)
        error = location["load"]
        messages = [error["message"], *(link["error"]["message"] for link in error["errorChain"])]
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
    url = f"redis://:{SECRET}@127.0.0.1:{password_redis.port}/0"

    @dg.asset
    def probe(redis_publisher: RedisPublisherResource) -> None:
        redis_publisher.connect().set("sentinel:probe", "reached")

    result = dg.materialize(
        [probe],
        resources={"redis_publisher": RedisPublisherResource()},
        run_config={"resources": {"redis_publisher": {"config": {"redis_url": url}}}},
        instance=dagster_instance,
        raise_on_error=False,
    )
    assert not result.success
    failures = [
        record
        for record in dagster_instance.all_logs(result.run_id)
        if record.dagster_event and record.dagster_event.is_failure
    ]
    shown = "\n".join(repr(record) for record in failures)
    assert "redis_url" in shown and "REDIS_URL" in shown
    assert SECRET not in shown
    with redis.Redis(port=password_redis.port, password=SECRET) as client:
        assert client.get("sentinel:probe") is None


def test_the_password_reaches_the_publisher_from_redis_url_in_the_environment(
    password_redis: RedisServer,
    dagster_instance: dg.DagsterInstance,
    settings_env: dict[str, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("REDIS_URL", f"redis://:{SECRET}@127.0.0.1:{password_redis.port}/0")

    @dg.asset
    def probe(redis_publisher: RedisPublisherResource) -> None:
        redis_publisher.connect().set("sentinel:probe", "reached")

    result = dg.materialize(
        [probe], resources={"redis_publisher": RedisPublisherResource()}, instance=dagster_instance
    )
    assert result.success
    with redis.Redis(port=password_redis.port, password=SECRET) as client:
        assert client.get("sentinel:probe") == b"reached"
