"""``sentinel up --production`` on a real PostgreSQL and on SQLite: a gRPC code server, the
webserver and the daemon as separate supervised processes against one instance, plus the
workers.

One platform per storage (its start-up is the expensive part), two tests in order:

1. the lag gate launches nothing on a fresh start; seeded as a restart on a later day
   finds it (its cursor's last due day is yesterday, set through GraphQL as the UI's
   "set cursor" does), it launches today's partition of both streams. A partition of
   transactions materialised as the UI's *Materialize* does (``launchRun`` of the implicit
   asset job with an asset selection), a partition of axioms launched through GraphQL and
   a 2-partition asset backfill of transactions all run to success; each waits *queued*
   (not started and blocked) while another run publishing its stream is in progress:
   Dagster's pools, one slot per stream, at run granularity. The webserver and the daemon
   are SIGKILLed mid-backfill, the supervisor restarts each alone (the code server and the
   runs it launched go on), and the backfill completes; the lag gate keeps its cursor and
   launches nothing twice;
2. a second webserver on the same instance sees the same runs, and over the whole module
   no two runs publishing one stream (the publish pools of their plans) and never more
   than ``max_concurrent_runs`` runs were in progress at once, while a run publishing the
   other stream did run beside them (from the runs' own start and end times).
"""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import Any

import pytest

from sentinel_platform.cli import proctree
from sentinel_platform.cli.production_layout import CODE_LOCATION
from sentinel_platform.redis_server import RedisServer, free_port
from sentinel_platform.registry import stream_specs
from sentinel_platform.settings import load_settings
from sentinel_platform.streams.plumbing.connection import connect
from sentinel_platform_tests.harness.postgres import PostgresServer
from sentinel_platform_tests.harness.sentinel_up import SENTINEL, http_ok
from sentinel_platform_tests.harness.waits import wait_until

# Each test waits on real Spark runs; the first also pays the platform's start-up.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

MAX_RUNS = 2
LAG_GATE = "consumer_lag_sensor"
GRAPHQL_PARTITION = "2026-03-01"
#: Two partitions: a backfill's runs queue behind each other as well as behind the others.
BACKFILL_PARTITIONS = ["2026-03-02", "2026-03-03"]
UI_PARTITION = "2026-03-04"
REPOSITORY = "__repository__"
TRANSACTION_ASSETS = ["raw_transactions", "enriched_transactions", "transaction_stream"]


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
    storage: str
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


RUN_IDS = "{ runsOrError(limit: 200) { ... on Runs { results { runId } } } }"
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
LAUNCH_BACKFILL = """
mutation($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message }
  }
}"""


@pytest.fixture(scope="module", params=["postgres", "sqlite"])
def platform(
    request: pytest.FixtureRequest,
    redis_server: RedisServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Platform]:
    """``sentinel up --production`` on PostgreSQL or SQLite, against the test Redis; SIGTERM
    at the end."""
    storage = request.param
    home = tmp_path_factory.mktemp(f"production-{storage}") / "home"
    url = ""
    if storage == "postgres":
        postgres_server: PostgresServer = request.getfixturevalue("postgres_server")
        url = postgres_server.create_database()
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
    up = Platform(storage, port, env, home, process)
    with pytest.MonkeyPatch.context() as patch:
        # The test reads the same instance: dagster.yaml takes the URL from the environment.
        if url:
            patch.setenv("SENTINEL_DAGSTER_POSTGRES_URL", url)
        try:
            yield up
        finally:
            seen = _seen_pids(up)
            process.send_signal(signal.SIGTERM)
            output = process.communicate(timeout=150)[0].decode()
            seen |= _seen_pids(up)
            assert process.returncode == 0, output
            left = sorted(pid for pid in seen if proctree.alive(pid))
            assert not left, f"processes left behind: {left}\n{output}"


def _seen_pids(up: Platform) -> set[int]:
    children = up.state().get("children", {}).values()
    return {int(pid) for child in children for pid in child["seen_pids"]}


def _instance(up: Platform) -> Any:
    import dagster as dg

    return dg.DagsterInstance.from_config(str(up.dagster_home))


def _wait_success(up: Platform, run_ids: list[str], timeout_s: float) -> None:
    import dagster as dg

    deadline = time.monotonic() + timeout_s
    with _instance(up) as instance:
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


def _lag_gate_runs(instance: Any) -> list[Any]:
    return [
        run
        for run in instance.get_runs()
        if run.tags.get("sentinel/launched_by", "").startswith(LAG_GATE)
    ]


def _submitted(runs: list[Any], count: int) -> list[Any]:
    """``runs`` once there are ``count`` and the run coordinator has taken each (the
    status leaves NOT_STARTED once it is queued), else []."""
    import dagster as dg

    taken = [run for run in runs if run.status != dg.DagsterRunStatus.NOT_STARTED]
    return runs if len(runs) >= count and len(taken) == len(runs) else []


def _cursor(instance: Any, name: str) -> str | None:
    for state in instance.all_instigator_state():
        if state.name == name and state.instigator_data is not None:
            return state.instigator_data.cursor  # type: ignore[no-any-return]
    return None


def _gate_state(instance: Any) -> dict[str, Any]:
    """The lag gate's per-stream state, from its cursor ({} before its first tick)."""
    cursor = _cursor(instance, LAG_GATE)
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
        runs = _submitted(_lag_gate_runs(instance), 2)
        if runs:
            return runs
        states = _gate_state(instance)
        if not _lag_gate_runs(instance) and all(
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


def _pools(run: Any) -> set[str]:
    """The pools of a run's plan (Dagster records them when the run is created)."""
    concurrency = run.run_op_concurrency
    return set(concurrency.all_pools or ()) if concurrency else set()


def _queued_while(instance: Any, waiting: str, running: str, passes: int = 5) -> None:
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


# Six Spark runs, those of one stream one at a time (its pool): about 6 minutes on a quiet
# 2-core machine, twice that beside the rest of the suite.
@pytest.mark.timeout(1500)
def test_lag_gate_ui_graphql_run_and_backfill_complete_across_restarts(
    platform: Platform,
) -> None:
    """The lag gate's launches, a UI-style Materialize, a GraphQL-launched partition and a
    2-partition backfill all succeed; each run publishing a stream waits queued for the one
    in progress; the webserver and the daemon are killed mid-backfill and come back alone;
    the lag gate keeps its cursor."""
    import dagster as dg
    from dagster_graphql import DagsterGraphQLClient

    up = platform
    wait_until(lambda: http_ok(f"http://127.0.0.1:{up.port}/server_info"), 240, 0.5)
    names = set(up.state()["children"])
    layout = ("dagster-code-server", "dagster-webserver", "dagster-daemon")
    assert set(layout) <= names and "dagster" not in names  # not `dagster dev`
    assert len({up.child(name)["pid"] for name in layout}) == 3

    pools = {spec.name: spec.pool for spec in stream_specs()}
    with _instance(up) as instance:
        storage = type(instance.run_storage).__name__
        assert (
            storage == {"postgres": "PostgresRunStorage", "sqlite": "SqliteRunStorage"}[up.storage]
        )
        # `sentinel up` set one slot per publish pool in the database before the daemon ran
        limits = {p.name: p.limit for p in instance.event_log_storage.get_pool_limits()}
        assert limits == {pool: 1 for pool in pools.values()}, limits

        # A fresh start launches nothing; a restart on a later day launches that day once.
        first = wait_until(lambda: _first_tick_done(instance), 120, 1)
        assert not _lag_gate_runs(instance), "the gate launched runs nobody asked for"
        today = first["transactions"]["last_due"]
        gate = _seed_gate(up, instance, _on_a_later_day(first), today)
        gate_by_stream = {run.tags["sentinel/stream"]: run.run_id for run in gate}
        assert set(gate_by_stream) == {"transactions", "axioms"}
        for stream, run_id in gate_by_stream.items():  # the pool comes from the run's plan
            assert _pools(instance.get_run_by_id(run_id)) == {pools[stream]}
        assert {run.tags["dagster/partition"] for run in gate} == {today}

        # While the gate's runs of both streams are in progress: a partition of transactions
        # as the UI's Materialize launches it, one of axioms through GraphQL, and a backfill
        # of transactions: each waits queued for the run publishing its stream.
        ui_run = _materialize_like_the_ui(up)
        assert _pools(instance.get_run_by_id(ui_run)) == {pools["transactions"]}
        assert instance.get_run_by_id(ui_run).job_name == "__ASSET_JOB"
        graphql_run = DagsterGraphQLClient("127.0.0.1", port_number=up.port).submit_job_execution(
            "publish_axioms",
            run_config=small_axioms(11),
            tags={"dagster/partition": GRAPHQL_PARTITION},
        )
        backfill_id = _launch_backfill(up)
        backfill_filter = dg.RunsFilter(tags={"dagster/backfill": backfill_id})
        _queued_while(instance, graphql_run, gate_by_stream["axioms"])
        _queued_while(instance, ui_run, gate_by_stream["transactions"])
        if not instance.get_run_by_id(ui_run).is_finished:
            first_backfill = wait_until(lambda: instance.get_runs(filters=backfill_filter), 60, 0.5)
            _queued_while(instance, first_backfill[0].run_id, ui_run)
        cursor_before = _cursor(instance, LAG_GATE)
        assert cursor_before, "the lag gate has ticked: it has a cursor"

        # Mid-backfill: kill the webserver and the daemon; the supervisor restarts each alone.
        for name in ("dagster-webserver", "dagster-daemon"):
            old = up.child(name)
            os.kill(old["pid"], signal.SIGKILL)
            wait_until(
                lambda n=name, o=old: up.child(n).get("pid") not in (None, o["pid"]), 60, 0.2
            )
            assert up.child(name)["restarts"] == old["restarts"] + 1
        assert up.child("dagster-code-server")["restarts"] == 0
        wait_until(lambda: http_ok(f"http://127.0.0.1:{up.port}/server_info"), 120, 0.5)

        _wait_success(up, [*gate_by_stream.values(), graphql_run, ui_run], timeout_s=900)
        deadline = time.monotonic() + 900
        while (status := instance.get_backfill(backfill_id).status.value) != "COMPLETED_SUCCESS":
            assert status == "REQUESTED", f"backfill {status}\n{up.logs('dagster-daemon')}"
            assert time.monotonic() < deadline, f"backfill not done\n{up.logs('dagster-daemon')}"
            time.sleep(1)
        runs = instance.get_runs(filters=backfill_filter)
        assert sorted(r.tags["dagster/partition"] for r in runs) == BACKFILL_PARTITIONS
        assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
        assert all(_pools(r) == {pools["transactions"]} for r in runs)
        assert {*BACKFILL_PARTITIONS, UI_PARTITION} <= instance.get_materialized_partitions(
            dg.AssetKey("transaction_stream")
        )
        assert GRAPHQL_PARTITION in instance.get_materialized_partitions(
            dg.AssetKey("axiom_stream")
        )
        # The restarted daemon went on from the stored cursor: the gate kept its per-stream
        # state and launched none of its partitions again.
        cursor_after = _cursor(instance, LAG_GATE)
        assert cursor_after
        assert (
            json.loads(cursor_after)["streams"].keys()
            == json.loads(cursor_before)["streams"].keys()
        )
        assert len(_lag_gate_runs(instance)) == 2


def _materialize_like_the_ui(up: Platform) -> str:
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


def _launch_backfill(up: Platform) -> str:
    """An asset backfill of the transactions group, small partitions, through GraphQL."""
    launched = graphql(
        up.port,
        LAUNCH_BACKFILL,
        {
            "params": {
                "assetSelection": [{"path": [name]} for name in TRANSACTION_ASSETS],
                "partitionNames": BACKFILL_PARTITIONS,
                "runConfigData": small_transactions(21),
            }
        },
    )["launchPartitionBackfill"]
    assert launched["__typename"] == "LaunchBackfillSuccess", launched
    return str(launched["backfillId"])


def test_two_webservers_see_the_same_runs_and_the_queue_held(platform: Platform) -> None:
    up = platform
    port = free_port()
    workspace = up.home / "run" / "workspace.yaml"
    second = subprocess.Popen(
        [
            str(Path(sys.executable).parent / "dagster-webserver"),
            "-w",
            str(workspace),
            "-h",
            "127.0.0.1",
            "-p",
            str(port),
        ],
        env=up.env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        wait_until(lambda: http_ok(f"http://127.0.0.1:{port}/server_info"), 120, 0.5)
        ids = [
            {r["runId"] for r in graphql(p, RUN_IDS)["runsOrError"]["results"]}
            for p in (up.port, port)
        ]
        # 2 of the gate, 1 + 1 + the backfill's of GraphQL
        assert ids[0] == ids[1] and len(ids[0]) >= 4 + len(BACKFILL_PARTITIONS)
    finally:
        os.killpg(second.pid, signal.SIGTERM)
        second.wait(30)

    with _instance(up) as instance:
        records = [r for r in instance.get_run_records() if r.start_time and r.end_time]
    # never two runs publishing one stream at once (a run that started and then waited for
    # its pool inside would count: its span is from its start), never more than MAX_RUNS
    # runs at once; and a run of the other stream did run beside them (not held by them)
    spans_of: dict[str, list[tuple[float, float]]] = {}
    for spec in stream_specs():
        spans = sorted(
            (r.start_time, r.end_time) for r in records if spec.pool in _pools(r.dagster_run)
        )
        assert len(spans) >= 2, f"{spec.name}: {spans}"
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert start >= end - 1.0, f"two {spec.name} publish runs overlapped: {spans}"
        spans_of[spec.name] = spans
    beside = [
        (tx, ax)
        for tx in spans_of["transactions"]
        for ax in spans_of["axioms"]
        if ax[0] < tx[1] - 1.0 and tx[0] < ax[1] - 1.0
    ]
    assert beside, f"no axioms publish ran beside a transactions publish: {spans_of}"
    edges = sorted([(r.start_time, 1) for r in records] + [(r.end_time, -1) for r in records])
    running, peak = 0, 0
    for _, step in edges:
        running += step
        peak = max(peak, running)
    assert peak <= MAX_RUNS
