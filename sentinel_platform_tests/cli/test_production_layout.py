"""``sentinel up --production`` on a real PostgreSQL: a gRPC code server, the webserver and
the daemon as separate supervised processes against one instance, plus the workers.

One platform for the module (its start-up is the expensive part), two tests in order:

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

The same layout on SQLite, the default storage, is proven with fewer runs in
``test_production_layout_sqlite.py``: the pools and the restarts are the storage's part,
the backfill and the second webserver are Dagster's own, the same on both.
"""

from __future__ import annotations

import itertools
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sentinel_platform.redis_server import free_port
from sentinel_platform.registry import stream_specs
from sentinel_platform_tests.harness import production_layout as layout
from sentinel_platform_tests.harness.production_layout import Platform
from sentinel_platform_tests.harness.sentinel_up import http_ok
from sentinel_platform_tests.harness.waits import wait_until

# Each test waits on real Spark runs; the first also pays the platform's start-up.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

platform = layout.production_platform("postgres")

GRAPHQL_PARTITION = "2026-03-01"
#: Two partitions: a backfill's runs queue behind each other as well as behind the others.
BACKFILL_PARTITIONS = ["2026-03-02", "2026-03-03"]
RUN_IDS = "{ runsOrError(limit: 200) { ... on Runs { results { runId } } } }"
LAUNCH_BACKFILL = """
mutation($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on PythonError { message }
  }
}"""


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
    with layout.instance_of(up) as instance:
        # While the gate's runs of both streams are in progress: a partition of transactions
        # as the UI's Materialize launches it, one of axioms through GraphQL, and a backfill
        # of transactions: each waits queued for the run publishing its stream.
        pools, gate_by_stream, ui_run = layout.gate_then_a_ui_run(up, instance)
        graphql_run = DagsterGraphQLClient("127.0.0.1", port_number=up.port).submit_job_execution(
            "publish_axioms",
            run_config=layout.small_axioms(11),
            tags={"dagster/partition": GRAPHQL_PARTITION},
        )
        backfill_id = _launch_backfill(up)
        backfill_filter = dg.RunsFilter(tags={"dagster/backfill": backfill_id})
        layout.queued_while(instance, graphql_run, gate_by_stream["axioms"])
        layout.queued_while(instance, ui_run, gate_by_stream["transactions"])
        if not instance.get_run_by_id(ui_run).is_finished:
            first_backfill = wait_until(lambda: instance.get_runs(filters=backfill_filter), 60, 0.5)
            layout.queued_while(instance, first_backfill[0].run_id, ui_run)
        cursor_before = layout.gate_cursor(instance)
        assert cursor_before, "the lag gate has ticked: it has a cursor"

        # Mid-backfill: kill the webserver and the daemon; the supervisor restarts each alone.
        layout.restart_webserver_and_daemon(up)

        layout.wait_success(up, [*gate_by_stream.values(), graphql_run, ui_run], timeout_s=900)
        deadline = time.monotonic() + 900
        while (status := instance.get_backfill(backfill_id).status.value) != "COMPLETED_SUCCESS":
            assert status == "REQUESTED", f"backfill {status}\n{up.logs('dagster-daemon')}"
            assert time.monotonic() < deadline, f"backfill not done\n{up.logs('dagster-daemon')}"
            time.sleep(1)
        runs = instance.get_runs(filters=backfill_filter)
        assert sorted(r.tags["dagster/partition"] for r in runs) == BACKFILL_PARTITIONS
        assert all(r.status == dg.DagsterRunStatus.SUCCESS for r in runs)
        assert all(layout.pools_of(r) == {pools["transactions"]} for r in runs)
        assert {*BACKFILL_PARTITIONS, layout.UI_PARTITION} <= instance.get_materialized_partitions(
            dg.AssetKey("transaction_stream")
        )
        assert GRAPHQL_PARTITION in instance.get_materialized_partitions(
            dg.AssetKey("axiom_stream")
        )
        layout.assert_gate_kept_its_cursor(instance, cursor_before)


def _launch_backfill(up: Platform) -> str:
    """An asset backfill of the transactions group, small partitions, through GraphQL."""
    launched = layout.graphql(
        up.port,
        LAUNCH_BACKFILL,
        {
            "params": {
                "assetSelection": [{"path": [name]} for name in layout.TRANSACTION_ASSETS],
                "partitionNames": BACKFILL_PARTITIONS,
                "runConfigData": layout.small_transactions(21),
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
            {r["runId"] for r in layout.graphql(p, RUN_IDS)["runsOrError"]["results"]}
            for p in (up.port, port)
        ]
        # 2 of the gate, 1 + 1 + the backfill's of GraphQL
        assert ids[0] == ids[1] and len(ids[0]) >= 4 + len(BACKFILL_PARTITIONS)
    finally:
        os.killpg(second.pid, signal.SIGTERM)
        second.wait(30)

    with layout.instance_of(up) as instance:
        records = [r for r in instance.get_run_records() if r.start_time and r.end_time]
    # never two runs publishing one stream at once (a run that started and then waited for
    # its pool inside would count: its span is from its start), never more than layout.MAX_RUNS
    # runs at once; and a run of the other stream did run beside them (not held by them)
    spans_of: dict[str, list[tuple[float, float]]] = {}
    for spec in stream_specs():
        spans = sorted(
            (r.start_time, r.end_time)
            for r in records
            if spec.pool in layout.pools_of(r.dagster_run)
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
    assert peak <= layout.MAX_RUNS
