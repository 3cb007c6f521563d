"""The operator's journey in a real browser, against the real ``sentinel up``.

Open the catalog, then the job `publish_transactions`, launch today's partition from the UI
(*Materialize all* -> *Latest*: on a fresh home the day's upstream is built in the same
run, where `transaction_stream` alone would fail for its missing input), wait for the run
to succeed, and find the short backpressure spike that hit it:
while the run publishes (paced below the pause limit), an unguarded Sentinel-L7 producer
floods the stream past the limit, so the run's producer stops until the slow worker drains
it. The operator finds the spike on the asset's lag plot and in its events (`lag_peak`), on
the lag sensor's tick, and as an alert in `sentinel status`. Each step is screenshotted.

Nothing is built beforehand: the home is fresh, as a new user's is. The day's
transactions are a small landing file (``SENTINEL_HOME/landing/transactions/<day>/``), as a
user's own data would be, so the run publishes a few hundred rows rather than the 20,000
it generates without one.
"""

from __future__ import annotations

import contextlib
import re
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from sentinel_platform.domains.operations.lag_gate import SENSOR_NAME as LAG_SENSOR
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform.streams.producer.publish import transaction_fields
from sentinel_platform_tests.harness.operations import read_alerts
from sentinel_platform_tests.harness.platform import (
    LOCATION,
    SPIKE_ENV,
    Platform,
    land_transactions,
    run_diagnosis,
    run_status,
    wait_for_run,
)
from sentinel_platform_tests.harness.strategies import valid_transaction
from sentinel_platform_tests.harness.waits import wait_until

#: A Spark run of three steps and a check, and a Dagster start: about 3 minutes on a quiet
#: 2-core machine; the timeout leaves room for a loaded one.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROWS = 300
PAUSE = int(SPIKE_ENV["SENTINEL_LAG_PAUSE"])
#: How the events list labels an event, e.g. "Nov 22, 11:43 AM".
EVENT_TIME = re.compile(r"^[A-Z][a-z]{2} \d{1,2}, \d{1,2}:\d{2} [AP]M$")
SENSOR_TICKS = """query($s: SensorSelector!) { sensorOrError(sensorSelector: $s) {
  ... on Sensor { sensorState { ticks(limit: 20) { skipReason } } } } }"""
PARTITION_RUNS = """query($f: RunsFilter!) { runsOrError(filter: $f, limit: 20) { ... on Runs {
  results { runId assetSelection { path } tags { key value } } } } }"""


def _ui_runs(platform: Platform, partition: str) -> list[str]:
    """Runs of ``partition`` materialising `transaction_stream` that no sensor or schedule
    launched (theirs carry ``sentinel/launched_by``): the one launched from the UI."""
    tag = {"key": "dagster/partition", "value": partition}
    runs = platform.graphql(PARTITION_RUNS, {"f": {"tags": [tag]}})["runsOrError"]["results"]
    return [
        run["runId"]
        for run in runs
        if {"path": ["transaction_stream"]} in (run["assetSelection"] or [])
        and not any(t["key"] == "sentinel/launched_by" for t in run["tags"])
    ]


def _flood_once_publishing(
    client: RedisClient, settings: Settings, platform: Platform, run_id: str
) -> None:
    """As soon as the run's first batch is on the stream, add four pause limits' worth of
    entries at once, as a producer without a guard would. The run builds and checks the
    day before it publishes (two Spark steps and a check first); a failed run fails here,
    with the Dagster log."""
    stream = transaction_keys(settings).stream

    def publishing() -> bool:
        return _run_status(platform, run_id) != "SUCCESS" and client.xlen(stream) > 0

    # The run's Spark session and its two build steps come first: minutes on a loaded host.
    what = f"the first batch of run {run_id}"
    wait_until(publishing, timeout_s=480, interval_s=0.2, what=what)
    pipe = client.pipeline(transaction=False)
    for n in range(4 * PAUSE):
        pipe.xadd(stream, transaction_fields(valid_transaction(f"legacy-{n}")))
    pipe.execute()


def _run_status(platform: Platform, run_id: str) -> str:
    return run_status(platform, run_id)


def _shot(page: Any, folder: Path) -> Callable[[str], None]:
    folder.mkdir(parents=True, exist_ok=True)

    def take(name: str) -> None:
        page.screenshot(path=str(folder / f"{name}.png"))

    return take


def assert_no_welcome(page: Any) -> None:
    """No "Join the Dagster community" dialog over the first page: the instance turns
    Dagster's new-user prompts off (``nux``). Given the seconds it took to appear before."""
    from playwright.sync_api import TimeoutError as PlaywrightTimeout

    with contextlib.suppress(PlaywrightTimeout):
        page.get_by_text("Join the Dagster community").wait_for(timeout=5_000)
    assert not page.get_by_text("Join the Dagster community").count()
    assert not page.get_by_role("button", name="Skip").count()


def test_operator_launches_from_the_ui_and_finds_the_backpressure_spike(
    platform: Platform,
    browser: Any,
    screenshots: Path,
    redis_client: RedisClient,
    settings: Settings,
) -> None:
    today = datetime.now(UTC).date().isoformat()
    land_transactions(settings, today, ROWS, "landed")
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.set_default_timeout(60_000)
    shot = _shot(page, screenshots)

    # 1. The catalog lists the stream assets.
    page.goto(f"{platform.url}/assets")
    page.get_by_role("link", name="transaction_stream").first.wait_for()
    assert_no_welcome(page)
    shot("1-catalog")

    # 2. The job that builds, checks and publishes a day: launch today's from the UI.
    page.goto(f"{platform.url}/locations/{LOCATION}/jobs/publish_transactions")
    page.get_by_role("button", name="Materialize all").first.click()
    dialog = page.locator("[role=dialog]").first
    dialog.get_by_role("button", name="Latest", exact=True).click()
    shot("2-launch-latest-partition")
    dialog.get_by_role("button", name="Launch 1 run").click()
    page.get_by_text("Launched run").wait_for()
    # Not simply the newest run: the platform's sensors and schedules launch runs too.
    (run_id,) = wait_until(lambda: _ui_runs(platform, today), timeout_s=30, interval_s=0.5)
    _flood_once_publishing(redis_client, settings, platform, run_id)

    # 3. The run page: wait for the run to succeed.
    page.goto(f"{platform.url}/runs/{run_id}")
    assert wait_for_run(platform, run_id, timeout_s=180) == "SUCCESS"
    # what a wait that timed out would have said: the run's events, the streams, the logs
    told = run_diagnosis(platform, run_id)
    assert "RUN_SUCCESS" in told or "Finished execution of run" in told, told[-2000:]
    assert "--- sentinel status" in told and "transactions" in told, told[-2000:]
    assert "--- sentinel-up.log" in told and "--- dagster.log" in told, told[-2000:]
    page.reload()
    page.get_by_text("Success").first.wait_for()
    page.get_by_text("Loading run logs").wait_for(state="hidden")
    shot("3-run-succeeded")

    # 4. The flood made a short spike (the run's producer stopped at the pause limit until
    #    the slow worker drained it): the lag sensor keeps it and alerts once.
    def spike_alert() -> list[Any]:
        return [
            a
            for a in read_alerts(redis_client, settings, LAG_SENSOR)
            if a.condition == "hard_backpressure"
        ]

    (alert,) = wait_until(spike_alert, timeout_s=120, interval_s=1)
    peak = int(alert.details["lag_peak"])
    assert peak >= PAUSE and alert.details["hard_backpressure_episodes"] >= 1
    status = platform.sentinel("status")
    assert f"lag peaked at {peak} (pause limit {PAUSE})" in status.stdout, status.stdout
    assert f"last publish: {today} ({ROWS} rows)" in status.stdout
    assert f"run {run_id[:8]}: success" in status.stdout

    # 5. The spike on the lag plot (Overview -> Metadata -> Plots -> Events) ...
    page.goto(f"{platform.url}/assets/transaction_stream")
    page.get_by_role("button", name="Plots").click()
    page.get_by_role("button", name="Events").click()
    plot = page.get_by_text("lag_peak", exact=True).first
    plot.scroll_into_view_if_needed()
    time.sleep(1)  # the chart draws itself after layout
    shot("4-lag-peak-plot")

    # ... and in the asset's events: the observation that recorded it.
    page.goto(f"{platform.url}/assets/transaction_stream?view=events")
    found = _find_event_with(page, "lag_peak", str(peak))
    assert found, f"no event shows lag_peak {peak}"
    shot("5-event-with-lag-peak")

    # 6. The lag sensor's ticks: each says why it launched nothing; one names the peak.
    page.goto(f"{platform.url}/locations/__repository__@{LOCATION}/sensors/{LAG_SENSOR}")
    assert _open_tick_naming(page, f"peak {peak}"), "no tick of the lag sensor names the peak"
    shot("6-lag-sensor-tick-reason")
    selector = {
        "repositoryLocationName": LOCATION,
        "repositoryName": "__repository__",
        "sensorName": LAG_SENSOR,
    }
    ticks = platform.graphql(SENSOR_TICKS, {"s": selector})["sensorOrError"]["sensorState"]
    reasons = [tick["skipReason"] or "" for tick in ticks["ticks"]]
    assert any(f"peak {peak}" in reason for reason in reasons), reasons


def _open_tick_naming(page: Any, text: str) -> bool:
    """Open the ticks one by one (newest first) until one's skip reason contains ``text``: up
    to 60, since a slow machine has the sensor tick more often before the page is read."""
    ticks = page.get_by_role("button", name=re.compile(r"\d+ runs? requested"))
    ticks.first.wait_for()
    for index in range(min(ticks.count(), 60)):
        ticks.nth(index).click()
        dialog = page.locator("[role=dialog]").filter(has_text="Skip reason").first
        dialog.wait_for()
        if text in dialog.inner_text():
            return True
        dialog.get_by_role("button", name="Close").click()
    return False


def _find_event_with(page: Any, key: str, value: str) -> bool:
    """Click through the events list until one's metadata table shows ``key`` = ``value``."""
    items = page.get_by_text(EVENT_TIME)
    items.first.wait_for()
    rows = page.get_by_role("row").filter(has_text=key)
    for index in range(min(items.count(), 20)):
        items.nth(index).click()
        time.sleep(0.5)
        if rows.count() and value in rows.first.inner_text():
            return True
    return False
