"""What the Dagster UI shows of resource config, for proving a password never reaches it.

Resource config is listed by the UI and stored with every run, so the tests read it the way
the UI does: GraphQL over code locations loaded out of process from a workspace file (as
``dagster dev`` loads them), and the failure events a run records.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import dagster as dg
import redis
from dagster_graphql.test.utils import define_out_of_process_context, execute_dagster_graphql

from sentinel_platform.redis_server import RedisServer

SECRET = "s3cret-Pw-9"
REPO_ROOT = Path(__file__).resolve().parents[2]
#: The key a probe asset writes; absent means the run never reached Redis.
PROBE_KEY = "sentinel:probe"
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


def write_workspace(directory: Path, locations: dict[str, str]) -> Path:
    """A workspace file loading each ``{location name: module source}`` as a python file."""
    entries = []
    for name, source in locations.items():
        module = directory / f"location_{name.replace('-', '_')}.py"
        module.write_text(source)
        entries.append(
            f"  - python_file:\n      relative_path: {module.name}\n"
            f"      location_name: {name}\n      working_directory: {REPO_ROOT}\n"
        )
    workspace = directory / "workspace.yaml"
    workspace.write_text("load_from:\n" + "".join(entries))
    return workspace


def query_locations(workspace: Path, instance: dg.DagsterInstance) -> dict[str, dict[str, Any]]:
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


def load_error_messages(location: dict[str, Any]) -> list[str]:
    """The message of a location's load error and of every error in its chain."""
    error = location["load"]
    return [error["message"], *(link["error"]["message"] for link in error["errorChain"])]


def failed_run_text(
    instance: dg.DagsterInstance,
    assets: list[dg.AssetsDefinition],
    resources: dict[str, Any],
    run_config: dict[str, Any],
) -> str:
    """Materialise ``assets`` with ``run_config``, a run that must fail; the failure events
    it recorded, as text (what its event log can show)."""
    result = dg.materialize(
        assets, resources=resources, run_config=run_config, instance=instance, raise_on_error=False
    )
    assert not result.success
    failures = [
        record
        for record in instance.all_logs(result.run_id)
        if record.dagster_event and record.dagster_event.is_failure
    ]
    return "\n".join(repr(record) for record in failures)


def password_url(server: RedisServer) -> str:
    """A URL of the password-protected ``server`` that carries the password."""
    return f"redis://:{SECRET}@127.0.0.1:{server.port}/0"


def probe_marker(server: RedisServer) -> bytes | None:
    """The probe key on the password-protected ``server`` (read with the password)."""
    with redis.Redis(port=server.port, password=SECRET) as client:
        return client.get(PROBE_KEY)
