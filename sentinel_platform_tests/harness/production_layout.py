"""``sentinel up --production`` for the production-layout tests: the platform under test,
what it is asked through GraphQL and its instance, and the steps both storages' tests share.

:func:`production_platform` makes the module-scoped ``platform`` fixture of one storage, so
each storage's test module runs in its own test process (``--dist loadfile``): the layout's
start-up and its Spark runs are the suite's longest waits, and two storages in one module
would queue them all behind each other.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any, Literal

import pytest

from sentinel_platform.cli import proctree
from sentinel_platform.cli.production_layout import CODE_LOCATION
from sentinel_platform.redis_server import RedisServer, free_port
from sentinel_platform.registry import stream_specs
from sentinel_platform.settings import load_settings
from sentinel_platform.streams.plumbing.connection import connect
from sentinel_platform_tests.harness.postgres import PostgresServer
from sentinel_platform_tests.harness.sentinel_up import SENTINEL, http_ok, seen_processes
from sentinel_platform_tests.harness.waits import wait_until

Storage = Literal["postgres", "sqlite"]
MAX_RUNS = 2
LAG_GATE = "consumer_lag_sensor"
REPOSITORY = "__repository__"
UI_PARTITION = "2026-03-04"
TRANSACTION_ASSETS = ["raw_transactions", "enriched_transactions", "transaction_stream"]
#: The run storage each storage's instance must use.
RUN_STORAGE = {"postgres": "PostgresRunStorage", "sqlite": "SqliteRunStorage"}

SET_SENSOR_CURSOR = """
mutation($selector: SensorSelector!, $cursor: String) {
  setSensorCursor(sensorSelector: $selector, cursor: $cursor) {
    __typename
    ... on PythonError { message }
  }
}"""
#: What the UI's *Materialize* sends: the implicit asset job with an asset selection.
LAUNCH_RUN = """
mutation($params: ExecutionParams!) {
  launchRun(executionParams: $params) {
    __typename
    ... on LaunchRunSuccess { run { runId } }
    ... on PythonError { message }
    ... on RunConfigValidationInvalid { errors { message } }
  }
}"""


def small_transactions(seed: int) -> dict[str, Any]:
    """A few rows in one Spark partition: the run's cost is the JVM, not the data."""
    return {
        "ops": {"raw_transactions": {"config": {"rows": 40, "seed": seed, "spark_partitions": 1}}}
    }


def small_axioms(seed: int) -> dict[str, Any]:
    readings = {"sources": 3, "readings_per_source": 24, "seed": seed, "spark_partitions": 1}
    return {"ops": {"telemetry_readings": {"config": readings}}}


@dataclass
class Platform:
    storage: Storage
    port: int
    env: dict[str, str]
    home: Path
    process: subprocess.Popen[bytes]

    @property
    def dagster_home(self) -> Path:
        return self.home / "dagster"

    def state(self) -> dict[str, Any]:
        path = self.home / "run" / "up.json"
        return json.loads(path.read_text()) if path.exists() else {}

    def child(self, name: str) -> dict[str, Any]:
        return dict(self.state().get("children", {}).get(name, {}))

    def logs(self, name: str, lines: int = 40) -> str:
        path = self.home / "logs" / f"{name}.log"
        text = path.read_text(errors="replace") if path.exists() else f"(no {path.name})"
        return "\n".join(text.splitlines()[-lines:])


def graphql(port: int, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
    body = json.dumps({"query": query, "variables": variables or {}}).encode()
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql", body, {"Content-Type": "application/json"}
    )
    with urllib.request.urlopen(request, timeout=60) as response:
        answer: dict[str, Any] = json.loads(response.read())
    assert "errors" not in answer, answer
    return dict(answer["data"])


def production_platform(storage: Storage) -> Callable[..., Iterator[Platform]]:
    """The module-scoped ``platform`` fixture: ``sentinel up --production`` on ``storage``
    against the test Redis; SIGTERM at the end, which must leave no process behind."""

    @pytest.fixture(scope="module", name="platform")
    def fixture(
        request: pytest.FixtureRequest,
        redis_server: RedisServer,
        tmp_path_factory: pytest.TempPathFactory,
    ) -> Iterator[Platform]:
        url = ""
        if storage == "postgres":
            postgres_server: PostgresServer = request.getfixturevalue("postgres_server")
            url = postgres_server.create_database()
        home = tmp_path_factory.mktemp(f"production-{storage}") / "home"
        up = _start(storage, home, redis_server, url)
        with pytest.MonkeyPatch.context() as patch:
            # The test reads the same instance: dagster.yaml takes the URL from the environment.
            if url:
                patch.setenv("SENTINEL_DAGSTER_POSTGRES_URL", url)
            try:
                wait_until(lambda: http_ok(f"http://127.0.0.1:{up.port}/server_info"), 240, 0.5)
                yield up
            finally:
                _stop(up)

    return fixture


def _start(storage: Storage, home: Path, redis_server: RedisServer, url: str) -> Platform:
    env = {
        **{k: v for k, v in os.environ.items() if k != "SENTINEL_DAGSTER_POSTGRES_URL"},
        "REDIS_URL": redis_server.url,
        "SENTINEL_HOME": str(home),
        "SENTINEL_DAGSTER_MAX_CONCURRENT_RUNS": str(MAX_RUNS),
        # The subject is Dagster, not backpressure: publishing never waits on the workers.
        "SENTINEL_LAG_WARN": "1000000",
        "SENTINEL_LAG_PAUSE": "2000000",
        "DAGSTER_HOME": str(home / "dagster"),
        "PYTHONUNBUFFERED": "1",
    }
    if url:
        env["SENTINEL_DAGSTER_POSTGRES_URL"] = url
    client = connect(load_settings(redis_url=redis_server.url, home=home))
    client.flushall()
    client.close()
    port = free_port()
    argv = [str(SENTINEL), "up", "--production", "--no-demo", "--port", str(port)]
    argv += ["--code-port", str(free_port())]
    process = subprocess.Popen(argv, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    return Platform(storage, port, env, home, process)


def _stop(up: Platform) -> None:
    seen = seen_processes(up.state())
    up.process.send_signal(signal.SIGTERM)
    output = up.process.communicate(timeout=150)[0].decode()
    seen |= seen_processes(up.state())
    assert up.process.returncode == 0, output
    left = sorted(proctree.still_running(seen))
    assert not left, f"processes left behind: {left}\n{output}"


def instance_of(up: Platform) -> Any:
    import dagster as dg

    return dg.DagsterInstance.from_config(str(up.dagster_home))


def assert_the_layout(up: Platform, instance: Any) -> dict[str, str]:
    """Three supervised Dagster processes (not ``dagster dev``) on the expected storage, one
    slot per publish pool set before the daemon ran; the pool of each stream."""
    names = set(up.state()["children"])
    layout = ("dagster-code-server", "dagster-webserver", "dagster-daemon")
    assert set(layout) <= names and "dagster" not in names  # not `dagster dev`
    assert len({up.child(name)["pid"] for name in layout}) == 3
    assert type(instance.run_storage).__name__ == RUN_STORAGE[up.storage]
    pools = {spec.name: spec.pool for spec in stream_specs()}
    limits = {p.name: p.limit for p in instance.event_log_storage.get_pool_limits()}
    assert limits == {pool: 1 for pool in pools.values()}, limits
    return pools


def wait_success(up: Platform, run_ids: list[str], timeout_s: float) -> None:
    import dagster as dg

    deadline = time.monotonic() + timeout_s
    with instance_of(up) as instance:
        while True:
            runs = {run_id: instance.get_run_by_id(run_id) for run_id in run_ids}
            failed = [
                r
                for r in runs.values()
                if r.status in (dg.DagsterRunStatus.FAILURE, dg.DagsterRunStatus.CANCELED)
            ]
            assert not failed, f"{failed}\n{up.logs('dagster-daemon')}"
            if all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs.values()):
                return
            assert time.monotonic() < deadline, (
                f"not all succeeded in {timeout_s}s: "
                f"{ {k: r.status for k, r in runs.items()} }\n{up.logs('dagster-daemon')}"
            )
            time.sleep(1)


def lag_gate_runs(instance: Any) -> list[Any]:
    return [
        run
        for run in instance.get_runs()
        if run.tags.get("sentinel/launched_by", "").startswith(LAG_GATE)
    ]


def gate_cursor(instance: Any) -> str | None:
    for state in instance.all_instigator_state():
        if state.name == LAG_GATE and state.instigator_data is not None:
            return state.instigator_data.cursor  # type: ignore[no-any-return]
    return None


def pools_of(run: Any) -> set[str]:
    """The pools of a run's plan (Dagster records them when the run is created)."""
    concurrency = run.run_op_concurrency
    return set(concurrency.all_pools or ()) if concurrency else set()


def gate_launches_a_later_day(up: Platform, instance: Any, pools: dict[str, str]) -> dict[str, str]:
    """A fresh start launches nothing; seeded as a restart on a later day (its cursor's
    last due day is yesterday), the gate launches today's partition of every stream once,
    each in its stream's pool. The gate's run of each stream."""
    first = wait_until(lambda: _first_tick_done(instance), 120, 1)
    assert not lag_gate_runs(instance), "the gate launched runs nobody asked for"
    today = first["transactions"]["last_due"]
    gate = _seed_gate(up, instance, _on_a_later_day(first), today)
    by_stream = {run.tags["sentinel/stream"]: run.run_id for run in gate}
    assert set(by_stream) == {spec.name for spec in stream_specs()}
    for stream, run_id in by_stream.items():  # the pool comes from the run's plan
        assert pools_of(instance.get_run_by_id(run_id)) == {pools[stream]}
    assert {run.tags["dagster/partition"] for run in gate} == {today}
    return by_stream


def gate_then_a_ui_run(up: Platform, instance: Any) -> tuple[dict[str, str], dict[str, str], str]:
    """The layout checked, the gate's launches of a later day, then a partition of
    transactions materialised as the UI does, in the transactions pool: the pool of each
    stream, the gate's run of each stream and the UI's run."""
    pools = assert_the_layout(up, instance)
    gate_by_stream = gate_launches_a_later_day(up, instance, pools)
    ui_run = materialize_like_the_ui(up)
    assert pools_of(instance.get_run_by_id(ui_run)) == {pools["transactions"]}
    assert instance.get_run_by_id(ui_run).job_name == "__ASSET_JOB"
    return pools, gate_by_stream, ui_run


def restart_webserver_and_daemon(up: Platform) -> None:
    """SIGKILL the webserver and the daemon; the supervisor restarts each alone, and the
    code server (with the runs it launched) goes on."""
    for name in ("dagster-webserver", "dagster-daemon"):
        old = up.child(name)
        os.kill(old["pid"], signal.SIGKILL)
        wait_until(lambda n=name, o=old: up.child(n).get("pid") not in (None, o["pid"]), 60, 0.2)
        assert up.child(name)["restarts"] == old["restarts"] + 1
    assert up.child("dagster-code-server")["restarts"] == 0
    wait_until(lambda: http_ok(f"http://127.0.0.1:{up.port}/server_info"), 120, 0.5)


def assert_gate_kept_its_cursor(instance: Any, before: str) -> None:
    """The restarted daemon went on from the stored cursor: the gate kept its per-stream
    state and launched none of its partitions again."""
    after = gate_cursor(instance)
    assert after
    assert json.loads(after)["streams"].keys() == json.loads(before)["streams"].keys()
    assert len(lag_gate_runs(instance)) == len(stream_specs())


def materialize_like_the_ui(up: Platform) -> str:
    """A partition of the transactions group materialised as the UI's button does: the
    implicit asset job (``__ASSET_JOB``), an asset selection, no job of the platform's."""
    launched = graphql(
        up.port,
        LAUNCH_RUN,
        {
            "params": {
                "selector": {
                    "repositoryLocationName": CODE_LOCATION,
                    "repositoryName": REPOSITORY,
                    "pipelineName": "__ASSET_JOB",
                    "assetSelection": [{"path": [name]} for name in TRANSACTION_ASSETS],
                    "assetCheckSelection": [],
                },
                "runConfigData": small_transactions(31),
                "mode": "default",
                "executionMetadata": {
                    "tags": [{"key": "dagster/partition", "value": UI_PARTITION}]
                },
            }
        },
    )["launchRun"]
    assert launched["__typename"] == "LaunchRunSuccess", launched
    return str(launched["run"]["runId"])


def queued_while(instance: Any, waiting: str, running: str, passes: int = 5) -> None:
    """``waiting`` stays queued for as long as ``running`` is in progress (checked over a few
    passes of the daemon's queue)."""
    import dagster as dg

    for _ in range(passes):
        if instance.get_run_by_id(running).is_finished:
            return
        # (a backfill's run is created, then submitted: NOT_STARTED comes before QUEUED)
        status = instance.get_run_by_id(waiting).status
        if status not in (dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.QUEUED):
            # ``running`` may have finished (and ``waiting`` left the queue) since the read above.
            assert instance.get_run_by_id(running).is_finished, status
            return
        time.sleep(1)


def _submitted(runs: list[Any], count: int) -> list[Any]:
    """``runs`` once there are ``count`` and the run coordinator has taken each (the
    status leaves NOT_STARTED once it is queued), else []."""
    import dagster as dg

    taken = [run for run in runs if run.status != dg.DagsterRunStatus.NOT_STARTED]
    return runs if len(runs) >= count and len(taken) == len(runs) else []


def _gate_state(instance: Any) -> dict[str, Any]:
    """The lag gate's per-stream state, from its cursor ({} before its first tick)."""
    cursor = gate_cursor(instance)
    return dict(json.loads(cursor)["streams"]) if cursor else {}


def _first_tick_done(instance: Any) -> dict[str, Any]:
    """The gate's state once its first tick noted the day due for every stream, else {}."""
    states = _gate_state(instance)
    names = {spec.name for spec in stream_specs()}
    return states if names <= set(states) and all(states[n].get("last_due") for n in names) else {}


def _on_a_later_day(states: dict[str, Any]) -> dict[str, Any]:
    """The cursor a restart on the next day finds: every stream's last due day one back."""
    earlier = {}
    for name, state in states.items():
        yesterday = date.fromisoformat(state["last_due"]) - timedelta(days=1)
        earlier[name] = {**state, "last_due": yesterday.isoformat()}
    return {"streams": earlier}


def _seed_gate(up: Platform, instance: Any, seeded: dict[str, Any], today: str) -> list[Any]:
    """The gate's launches once its cursor is ``seeded`` (through GraphQL, as the UI's "set
    cursor"); set again while a tick in flight wrote its own state over it (the run keys
    make a repeated launch a no-op)."""

    def launched() -> list[Any]:
        runs = _submitted(lag_gate_runs(instance), len(seeded["streams"]))
        if runs:
            return runs
        states = _gate_state(instance)
        if not lag_gate_runs(instance) and all(
            states.get(name, {}).get("last_due") == today for name in seeded["streams"]
        ):
            _set_gate_cursor(up, json.dumps(seeded))
        return []

    _set_gate_cursor(up, json.dumps(seeded))
    return list(wait_until(launched, 180, 1))


def _set_gate_cursor(up: Platform, cursor: str) -> None:
    selector = {
        "repositoryLocationName": CODE_LOCATION,
        "repositoryName": REPOSITORY,
        "sensorName": LAG_GATE,
    }
    done = graphql(up.port, SET_SENSOR_CURSOR, {"selector": selector, "cursor": cursor})
    assert done["setSensorCursor"]["__typename"] == "Sensor", done
