"""An operator's first hour in a real browser, against the real ``sentinel up``: no prompt
over the first page, nothing launched unasked, a demo that touches none of the user's
assets, checks and sensor pages that read true, and a *Materialize* of a fresh partition
that is refused with advice the test then follows as written.

1. The catalog opens with no "Join the Dagster community" dialog; the start-up lines say
   what runs by itself, and the lag gate launches no publish run on a fresh start.
2. The stream-health checks run, then a demo run (as the demo schedule launches it): it
   publishes marked entries to the real streams, leaves the user's last publish of each
   stream as it was, queues in both publish pools and materialises no data asset, so the
   checks still read *Passed* for the stream asset (not "Not evaluated").
3. Once the workers drained the demo, the lag check reads "idle: nothing to drain" and the
   observations carry no drain rate; the lag sensor's cursor stays small.
4. *Materialize…* on `transaction_stream` for today's (fresh) partition: the run fails with
   one clean alert and an advice; the test runs the advice's command in a shell without
   ``DAGSTER_HOME``, and the partition shows up built in this UI's instance.
"""

from __future__ import annotations

import json
import re
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from sentinel_platform.domains.demo import schedule as demo
from sentinel_platform.domains.demo.traffic import ASSET_NAME as DEMO_ASSET
from sentinel_platform.domains.operations.lag_gate import SENSOR_NAME as LAG_SENSOR
from sentinel_platform.domains.operations.run_failures import SENSOR_NAME as FAILURE_SENSOR
from sentinel_platform.domains.operations.stream_health import EVICTION_CHECK, LAG_CHECK
from sentinel_platform.registry import stream_specs
from sentinel_platform.schemas import Transaction, is_demo
from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.lag import measure_lag
from sentinel_platform.streams.backlog.progress import last_publish, record_publish
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import axiom_keys, transaction_keys
from sentinel_platform_tests.cli.test_operator_journey import (
    ROWS,
    _shot,
    _ui_runs,
    assert_no_welcome,
)
from sentinel_platform_tests.harness.operations import read_alerts
from sentinel_platform_tests.harness.platform import (
    LOCATION,
    Platform,
    land_transactions,
    launch,
    wait_for_run,
)
from sentinel_platform_tests.harness.waits import wait_until

#: A Dagster start, a checks run, a demo run, a failed run and a landed day through
#: Spark: about 5 minutes on a quiet 2-core machine; the timeout leaves room for a loaded one.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

SENSOR = {"repositoryLocationName": LOCATION, "repositoryName": "__repository__"}
CHECKS = """query($k: AssetKeyInput!) { assetNodeOrError(assetKey: $k) { ... on AssetNode {
  assetChecksOrError { ... on AssetChecks { checks { name
    executionForLatestMaterialization { status evaluation { description } } } } } } } }"""
MATERIALIZED = """query($k: AssetKeyInput!) { assetNodeOrError(assetKey: $k) {
  ... on AssetNode { partitionStats { numMaterialized } } } }"""
SENSOR_STATE = """query($s: SensorSelector!) { sensorOrError(sensorSelector: $s) { ... on Sensor {
  sensorState { ticks(limit: 5) { status } typeSpecificData { ... on SensorData { lastCursor } } }
} } }"""
ALL_RUNS = """query { runsOrError(limit: 100) { ... on Runs { results { runId jobName
  tags { key value } } } } }"""
STEP_FAILURES = """query($id: ID!) { logsForRun(runId: $id) { ... on EventConnection { events {
  __typename ... on ExecutionStepFailureEvent { stepKey failureMetadata { description } } } } } }"""
#: A publish of the user's own, recorded before the demo runs.
USERS_PUBLISH = {"run_id": "users-run", "partition": "2026-11-20", "rows": "20000"}
#: The advice as the failure quotes it, between backticks.
ADVICE = re.compile(r"build transaction_stream with its upstream: `([^`]+)`")


def _checks(platform: Platform, asset: str) -> dict[str, dict[str, Any]]:
    """Each check of ``asset`` -> its execution for the latest materialisation (the UI's)."""
    node = platform.graphql(CHECKS, {"k": {"path": [asset]}})["assetNodeOrError"]
    checks = node["assetChecksOrError"]["checks"]
    return {c["name"]: c["executionForLatestMaterialization"] or {} for c in checks}


def _materialized(platform: Platform, asset: str) -> int:
    node = platform.graphql(MATERIALIZED, {"k": {"path": [asset]}})["assetNodeOrError"]
    return int((node.get("partitionStats") or {}).get("numMaterialized") or 0)


def _sensor_state(platform: Platform, name: str) -> dict[str, Any]:
    found = platform.graphql(SENSOR_STATE, {"s": {**SENSOR, "sensorName": name}})
    return dict(found["sensorOrError"]["sensorState"])


def _launched_by_the_lag_gate(platform: Platform) -> list[str]:
    runs = platform.graphql(ALL_RUNS)["runsOrError"]["results"]
    return [
        f"{run['jobName']} {run['runId'][:8]}"
        for run in runs
        if any(
            t["key"] == "sentinel/launched_by" and t["value"].startswith(LAG_SENSOR)
            for t in run["tags"]
        )
    ]


def _settled(execution: dict[str, Any]) -> dict[str, Any] | None:
    """A check's execution once it has an outcome (``IN_PROGRESS`` while a run, such as the
    checks schedule's, is evaluating it)."""
    return execution if execution.get("status") not in (None, "IN_PROGRESS") else None


def _drained(client: RedisClient, settings: Settings) -> bool:
    keys = (transaction_keys(settings), axiom_keys(settings))
    return all(measure_lag(client, k).lag == 0 for k in keys)


def _failure_description(platform: Platform, run_id: str) -> str:
    events = platform.graphql(STEP_FAILURES, {"id": run_id})["logsForRun"]["events"]
    failures = [e for e in events if e["__typename"] == "ExecutionStepFailureEvent"]
    assert failures, f"run {run_id} has no step failure"
    return str((failures[0]["failureMetadata"] or {}).get("description") or "")


def _data_assets() -> set[str]:
    """Every stream's publish asset and all it is built from, as the code location has them."""
    from sentinel_platform.definitions import defs

    streams = dg.AssetSelection.assets(*(spec.asset for spec in stream_specs()))
    return {key.to_user_string() for key in streams.upstream().resolve(defs.resolve_asset_graph())}


def _assert_demo_traffic_only(
    platform: Platform, client: RedisClient, settings: Settings, run_id: str
) -> None:
    """The demo run published marked entries to both streams, left each stream's last
    publish the user's, materialised none of the data assets, and queued in both publish
    pools (so it never runs beside a user's publish of either)."""
    published = [
        Transaction.from_fields(fields).id
        for _, fields in client.xrange(transaction_keys(settings).stream)
    ]
    assert len(published) == len(set(published)) == demo.TRANSACTIONS_PER_TICK
    for keys in (transaction_keys(settings), axiom_keys(settings)):
        entries = [fields for _, fields in client.xrange(keys.stream)]
        assert entries and all(is_demo(fields) for fields in entries), keys.stream
        assert last_publish(client, keys) == USERS_PUBLISH, "the user's, not the demo's"
    with dg.DagsterInstance.from_config(str(settings.dagster_home)) as instance:
        materialised = {
            key.to_user_string()
            for key in instance.get_asset_keys()
            if instance.get_latest_materialization_event(key) is not None
        }
        run = instance.get_run_by_id(run_id)
    data_assets = _data_assets()
    assert len(data_assets) >= 2 * len(stream_specs())  # each stream's asset and its upstream
    assert DEMO_ASSET in materialised and not data_assets & materialised, materialised
    for asset in data_assets:  # and so the UI says
        assert _materialized(platform, asset) == 0, f"the demo materialised {asset}"
    assert run is not None and run.run_op_concurrency is not None
    assert run.run_op_concurrency.all_pools == {spec.pool for spec in stream_specs()}


def test_first_hour_reads_true_and_a_fresh_materialize_gives_advice_that_works(
    calm_platform: Platform,
    browser: Any,
    screenshots: Path,
    redis_client: RedisClient,
    settings: Settings,
    tmp_path: Path,
) -> None:
    platform = calm_platform
    today = datetime.now(UTC).date().isoformat()
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.set_default_timeout(60_000)
    shot = _shot(page, screenshots)

    # 1. No prompt over the catalog; the start-up lines say what runs by itself; the lag
    #    gate's first ticks launch nothing.
    page.goto(f"{platform.url}/assets")
    page.get_by_role("link", name="transaction_stream").first.wait_for()
    assert_no_welcome(page)
    startup = (settings.home_dir / "logs" / "sentinel-up.log").read_text()
    assert "runs by itself: " in startup and "none for today on a fresh home" in startup, startup
    assert "superseded" not in platform.dagster_log_tail(400)
    wait_until(
        lambda: len(_sensor_state(platform, LAG_SENSOR)["ticks"]) >= 2, timeout_s=120, interval_s=1
    )
    assert _launched_by_the_lag_gate(platform) == []

    # 2. The health checks, then one demo run as the schedule launches it, over a user's
    #    last publish of each stream (which the demo must leave as it is).
    streams = (transaction_keys(settings), axiom_keys(settings))
    for keys in streams:
        record_publish(redis_client, keys, USERS_PUBLISH)
    checks_run = launch(platform, "stream_health_checks_job")
    wait_for_run(platform, checks_run, timeout_s=300)
    demo_run = launch(platform, demo.JOB_NAME, today, demo.demo_run_config(4242))
    wait_for_run(platform, demo_run, timeout_s=420)
    _assert_demo_traffic_only(platform, redis_client, settings, demo_run)
    # The checks schedule may be evaluating it right now: wait for an outcome, then judge it.
    eviction = wait_until(
        lambda: _settled(_checks(platform, "transaction_stream")[EVICTION_CHECK]),
        timeout_s=300,
        interval_s=1,
    )
    assert eviction.get("status") == "SUCCEEDED", eviction
    page.goto(f"{platform.url}/assets/transaction_stream?view=checks")
    succeeded = page.get_by_text("Succeeded", exact=True)
    wait_until(lambda: succeeded.count() == 5, timeout_s=60, interval_s=0.5)  # all five checks
    assert not page.get_by_text("Not evaluated").count()
    shot("7-checks-after-a-demo-run")

    # 3. Drained: the stream reads idle, with no drain-rate sample; the cursor stays small.
    wait_until(lambda: _drained(redis_client, settings), timeout_s=180, interval_s=1)

    def idle_check() -> str | None:
        lag = _checks(platform, "transaction_stream")[LAG_CHECK]
        text = ((lag.get("evaluation") or {}).get("description")) or ""
        return text if text.startswith("idle: nothing to drain") else None

    wait_until(idle_check, timeout_s=180, interval_s=1)
    page.goto(f"{platform.url}/assets/transaction_stream?view=checks")
    # the page opens the first check by name (ai_verdicts): open the lag check's
    page.get_by_text(LAG_CHECK).filter(visible=True).first.click()
    page.get_by_text("idle: nothing to drain").first.wait_for()
    shot("8-idle-stream-lag-check")
    cursor = _sensor_state(platform, LAG_SENSOR)["typeSpecificData"]["lastCursor"] or ""
    assert len(cursor) <= 400 and '\\"' not in cursor, cursor
    assert {"transactions", "axioms"} <= set(json.loads(cursor)["streams"])
    page.goto(f"{platform.url}/locations/__repository__@{LOCATION}/sensors/{LAG_SENSOR}")
    page.get_by_text("Cursor").first.wait_for()
    time.sleep(1)  # the tick timeline draws itself after layout
    shot("9-lag-sensor-page")

    # 4. Materialize a fresh partition of transaction_stream from the UI: refused, with
    #    advice that works as written.
    page.goto(f"{platform.url}/assets/transaction_stream")
    page.get_by_role("button", name="Materialize…").first.click()
    warning = page.locator("[role=dialog]").filter(has_text="Are you sure?").first
    warning.get_by_text("enriched_transactions").wait_for()  # the UI warns of the gap ...
    warning.get_by_role("button", name="Confirm").click()  # ... and lets the user go on
    dialog = page.locator("[role=dialog]").first
    dialog.get_by_role("button", name="Latest", exact=True).click()
    dialog.get_by_role("button", name="Launch 1 run").click()
    page.get_by_text("Launched run").wait_for()
    (run_id,) = wait_until(lambda: _ui_runs(platform, today), timeout_s=30, interval_s=0.5)
    status = wait_for_run(platform, run_id, timeout_s=300, allow_failure=True)
    assert status == "FAILURE"
    description = _failure_description(platform, run_id)
    (command,) = ADVICE.findall(description)
    assert f"DAGSTER_HOME={settings.dagster_home}" in command
    assert f"--select '*transaction_stream' --partition {today}" in command
    page.goto(f"{platform.url}/runs/{run_id}")
    page.get_by_text("with its upstream").first.wait_for()
    shot("10-fresh-partition-refused-with-advice")

    (alert,) = wait_until(
        lambda: read_alerts(redis_client, settings, FAILURE_SENSOR), timeout_s=120, interval_s=1
    )
    assert alert.summary.count("MissingUpstreamPartitionError") == 1, alert.summary
    assert "sentinel_platform.resources" not in alert.summary

    # The user's own day lands before the rebuild (as the operator journey's does): the
    # advice builds it, a few hundred rows, rather than the 20,000 it generates without one.
    land_transactions(settings, today, ROWS, "landed")
    shell_env = {k: v for k, v in platform.env.items() if k != "DAGSTER_HOME"}
    followed = subprocess.run(
        ["bash", "-c", command],
        env=shell_env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert followed.returncode == 0, (followed.stdout + followed.stderr)[-4000:]
    for asset in ("raw_transactions", "enriched_transactions", "transaction_stream"):
        assert _materialized(platform, asset) == 1, f"the advice did not build {asset}"
    assert not (tmp_path / "history").exists()  # nothing recorded into a stray instance
    page.goto(f"{platform.url}/assets/transaction_stream?view=partitions&partition={today}")
    page.get_by_text("rows_published").first.wait_for()  # the day's publish, in this UI
    shot("11-partition-built-by-the-advice")
