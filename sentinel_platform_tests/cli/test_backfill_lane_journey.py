"""A backfill at half price as a Dagster user lives it, in a real browser against the real
``sentinel up``: past days go through the provider's batch API, today stays real time,
each verdict exactly once, and the cost report tells the lanes apart.

``sentinel up`` runs with ``SENTINEL_ANALYZER_API=openai`` pointed at a real HTTP server
speaking OpenAI's Batch API and Chat Completions on one URL, the batch lane's polls of a
fraction of a second and prices set. Landing files hold four days: two past days are
backfilled from the Dagster UI (the publish job's "Materialize all" dialog, the partition
range typed, the run tag ``sentinel/lane=batch`` added in its tag editor), a third past
day through GraphQL (``launchPartitionBackfill`` with the tag), and today's partition is
launched as a plain run. Afterwards:

* every past message has exactly one verdict, ``lane=batch``, decided from a batch the
  server created; the server answered real-time calls only for today's messages, each
  of which has exactly one real-time verdict;
* ``sentinel status --json`` showed the batch lane "at the provider" while a batch was
  there, apart from the stream's lag;
* the reporting job's cost table has both lanes, the batch lane's tokens at half the
  real-time price, and ``saved`` is what that half saved.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from sentinel_platform.domains.shared.lane import LANE_TAG
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform.streams.plumbing.replies import entries
from sentinel_platform_tests.harness.batch_api_server import BatchApiServer
from sentinel_platform_tests.harness.platform import (
    Platform,
    land_transactions,
    launch,
    serving_platform,
    wait_for_run,
)
from sentinel_platform_tests.harness.processes import MODEL_NAMES
from sentinel_platform_tests.harness.waits import wait_until

#: Four Spark publish runs and a reporting run through ``sentinel up``: minutes.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROWS = 12
RUN_TIMEOUT_S = 420
INPUT_PER_MTOK, OUTPUT_PER_MTOK = 0.15, 0.60
PRICES = {
    "SENTINEL_ANALYZER_PRICE_INPUT_PER_MTOK": str(INPUT_PER_MTOK),
    "SENTINEL_ANALYZER_PRICE_OUTPUT_PER_MTOK": str(OUTPUT_PER_MTOK),
}
#: Polls every half second. The server keeps every batch in progress (``HELD``) until
#: ``sentinel status`` has been seen showing one at the provider, then ends each at its
#: next poll: the test waits on that sight, not on a guess of how long it takes.
FAST_LANE = {
    "SENTINEL_ANALYZER_BATCH_LANE": "on",  # the stub stands in for the provider's host
    "SENTINEL_ANALYZER_BATCH_POLL_S": "0.5",
    "SENTINEL_ANALYZER_BATCH_POLL_MAX_S": "0.5",
    "SENTINEL_ANALYZER_BATCH_GATHER_S": "0.5",
}
HELD = 1_000_000
JOB = "publish_transactions"
TRANSACTION_ASSETS = ["raw_transactions", "enriched_transactions", "transaction_stream"]
LAUNCH_BACKFILL = """mutation($p: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $p) {
    __typename ... on LaunchBackfillSuccess { backfillId } ... on PythonError { message } } }"""
RUNS = """query($f: RunsFilter) { runsOrError(filter: $f) { ... on Runs { results {
  runId status tags { key value } } } } }"""
MATERIALIZATIONS = """query($k: AssetKeyInput!) { assetOrError(assetKey: $k) { ... on Asset {
  assetMaterializations(limit: 1) { metadataEntries { label __typename
    ... on FloatMetadataEntry { floatValue }
    ... on TableMetadataEntry { table { records } } } } } } }"""


@pytest.fixture
def batch_platform(
    settings: Settings, settings_env: dict[str, str], batch_api_server: BatchApiServer
) -> Iterator[Platform]:
    """``sentinel up`` whose workers ask ``batch_api_server`` (OpenAI's API, both lanes),
    prices set, the batch lane polled fast; SIGTERM at teardown."""
    batch_api_server.polls_to_end = HELD
    analyzer = {
        "SENTINEL_ANALYZER_API": "openai",
        "SENTINEL_ANALYZER_URL": f"{batch_api_server.url}/v1",
        "SENTINEL_ANALYZER_MODEL": MODEL_NAMES["openai"],
        "SENTINEL_ANALYZER_API_KEY": "sk-backfill-journey-0001",
        **FAST_LANE,
        **PRICES,
    }
    with serving_platform(settings, settings_env, analyzer) as running:
        yield running


def _verdicts(client: RedisClient, settings: Settings, ids: set[str]) -> list[dict[str, str]]:
    """The result entries of the transactions ``ids``, oldest first."""
    found = entries(client.xrange(transaction_keys(settings).results))
    return [dict(fields) for _, fields in found if fields.get("txn_id") in ids]


def _backfill_from_the_ui(
    platform: Platform, page: Any, days: tuple[str, str], screenshots: Path
) -> None:
    """The publish job's "Materialize all" dialog: the range ``days`` typed, the lane tag
    added, "Launch backfill" clicked."""
    page.goto(f"{platform.url}/locations/sentinel_platform/jobs/{JOB}")
    page.get_by_role("button", name="Materialize all").click()
    dialog = page.get_by_role("dialog")
    dialog.get_by_text("Partition selection").first.wait_for()
    page.screenshot(path=str(screenshots / "backfill-dialog.png"))
    selection = dialog.locator("input[type=text]").first
    selection.fill(f"[{days[0]}...{days[1]}]")
    selection.press("Enter")
    dialog.get_by_text(f"{len(days)} partitions").first.wait_for()
    dialog.get_by_text("Tags", exact=True).click()  # a folded section
    dialog.get_by_role("button", name="Add tags", exact=True).click()
    page.get_by_placeholder("Tag Key").last.fill(LANE_TAG)
    page.get_by_placeholder("Tag Value").last.fill("batch")
    page.screenshot(path=str(screenshots / "backfill-tag-editor.png"))
    page.get_by_role("button", name="Apply").click()
    dialog.get_by_text(f"{LANE_TAG}: batch").wait_for()  # the section shows the tag
    page.screenshot(path=str(screenshots / "backfill-dialog-tagged.png"))
    dialog.get_by_role("button", name="Launch backfill").click()
    page.get_by_role("button", name="Launch backfill").wait_for(state="detached")


def _runs_of(platform: Platform, day: str) -> list[dict[str, Any]]:
    """The runs of ``day``'s partition, each with its tags as a dict."""
    found = platform.graphql(RUNS, {"f": {"tags": [{"key": "dagster/partition", "value": day}]}})
    runs = found["runsOrError"]["results"]
    return [{**r, "tags": {t["key"]: t["value"] for t in r["tags"]}} for r in runs]


def _ended_runs_of(platform: Platform, day: str) -> list[dict[str, Any]] | None:
    """The runs of ``day``'s partition once there are some and every one has ended."""
    runs = _runs_of(platform, day)
    ended = runs and all(r["status"] in ("SUCCESS", "FAILURE", "CANCELED") for r in runs)
    return runs if ended else None


def _at_provider(platform: Platform, stream_key: str) -> dict[str, Any] | None:
    """The transaction stream's ``sentinel status --json`` while a batch is at the
    provider and polled (its provider status known), else None."""
    shown = platform.sentinel("status", "--json")
    doc = json.loads(shown.stdout)
    (stream,) = [s for s in doc["streams"] if s["stream"] == stream_key]
    lane = stream["batch"]
    return stream if lane["at_provider"] > 0 and lane["provider_status"] else None


def _priced(rows: list[dict[str, str]], share: float) -> float:
    """What the verdicts ``rows`` billed, at ``share`` of the real-time prices."""
    tokens_in = sum(int(r["input_tokens"]) for r in rows)
    tokens_out = sum(int(r["output_tokens"]) for r in rows)
    return share * (tokens_in * INPUT_PER_MTOK + tokens_out * OUTPUT_PER_MTOK) / 1_000_000


def _metadata(platform: Platform, asset: str) -> dict[str, Any]:
    reply = platform.graphql(MATERIALIZATIONS, {"k": {"path": [asset]}})["assetOrError"]
    (materialization,) = reply["assetMaterializations"]
    return {entry["label"]: entry for entry in materialization["metadataEntries"]}


def test_a_backfill_goes_through_the_batch_lane_at_half_price(
    batch_platform: Platform,
    batch_api_server: BatchApiServer,
    browser: Any,
    screenshots: Path,
    redis_client: RedisClient,
    settings: Settings,
) -> None:
    platform, server = batch_platform, batch_api_server
    today = datetime.now(UTC).date()
    past = [(today - timedelta(days=n)).isoformat() for n in (4, 3, 2)]
    landed = {day: set(land_transactions(settings, day, ROWS, f"bf{day}")) for day in past}
    fresh = set(land_transactions(settings, today.isoformat(), ROWS, "bf-today"))
    backfilled = set().union(*landed.values())
    screenshots.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.set_default_timeout(60_000)

    # Two past days from the UI's backfill dialog, one through GraphQL, today as a run.
    _backfill_from_the_ui(platform, page, (past[1], past[2]), screenshots)
    params = {
        "assetSelection": [{"path": [name]} for name in TRANSACTION_ASSETS],
        "partitionNames": [past[0]],
        "tags": [{"key": LANE_TAG, "value": "batch"}],
    }
    launched = platform.graphql(LAUNCH_BACKFILL, {"p": params})["launchPartitionBackfill"]
    assert launched["__typename"] == "LaunchBackfillSuccess", launched
    live = launch(platform, JOB, today.isoformat())

    stream = wait_until(
        lambda: _at_provider(platform, transaction_keys(settings).stream),
        timeout_s=RUN_TIMEOUT_S,
        interval_s=2,  # a CLI process a look; the batches are held until one is seen
        what="sentinel status showing a polled batch at the provider",
    )
    assert stream is not None
    lane = stream["batch"]
    assert lane["batches"] >= 1 and lane["provider_status"] in ("validating", "in_progress")
    assert stream["lag"] <= len(fresh), f"the batch lane counted as lag: {stream}"
    server.polls_to_end = 1  # seen: every batch ends at its next poll

    assert wait_for_run(platform, live, RUN_TIMEOUT_S) == "SUCCESS"
    wanted = backfilled | fresh
    wait_until(
        lambda: {v["txn_id"] for v in _verdicts(redis_client, settings, wanted)} == wanted,
        timeout_s=RUN_TIMEOUT_S,
        interval_s=1,
        what=f"a verdict for each of the {len(wanted)} messages",
    )
    for day in past:  # a run may still be ending when its day's verdicts are all in
        runs = wait_until(
            lambda day=day: _ended_runs_of(platform, day),
            timeout_s=RUN_TIMEOUT_S,
            interval_s=1,
            what=f"the runs of {day} ended",
        )
        assert runs and all(r["tags"].get(LANE_TAG) == "batch" for r in runs), runs
        assert all(r["status"] == "SUCCESS" for r in runs), runs

    verdicts = _verdicts(redis_client, settings, wanted)
    assert Counter(v["txn_id"] for v in verdicts) == Counter(wanted), "each exactly once"
    batch = [v for v in verdicts if v["txn_id"] in backfilled]
    realtime = [v for v in verdicts if v["txn_id"] in fresh]
    assert all(v.get("lane") == "batch" and v["driver_used"] == "analyzer" for v in batch)
    assert all(v.get("lane", "realtime") == "realtime" for v in realtime), realtime
    assert all(v["driver_used"] == "analyzer" for v in realtime), realtime
    assert server.submissions() > 0
    sent = {c for b in server.batches.values() for c in b["custom_ids"]}
    assert len(sent) == len(backfilled), "each past message in one batch request"
    assert server.realtime_calls() == len(fresh), "real-time calls only for today's messages"

    # The cost report: both lanes, the batch lane's tokens at half price, what it saved.
    report = launch(platform, "report_compliance")
    assert wait_for_run(platform, report, RUN_TIMEOUT_S) == "SUCCESS"
    read_back = _metadata(platform, "transaction_verdicts")
    costs = [json.loads(r) for r in read_back["analyzer_cost"]["table"]["records"]]
    by_lane: dict[str, float] = {}
    for row in costs:
        if row["day"] in (*past, today.isoformat()):
            by_lane[row["lane"]] = by_lane.get(row["lane"], 0.0) + row["cost"]
    assert sorted(by_lane) == ["batch", "realtime"], costs
    assert by_lane["batch"] == pytest.approx(_priced(batch, 0.5), abs=1e-6), costs
    assert by_lane["realtime"] == pytest.approx(_priced(realtime, 1.0), abs=1e-6), costs
    assert read_back["saved"]["floatValue"] == pytest.approx(_priced(batch, 0.5), abs=1e-6)
    page.goto(f"{platform.url}/assets/transaction_verdicts")
    page.get_by_text("analyzer_cost").first.scroll_into_view_if_needed()
    page.screenshot(path=str(screenshots / "backfill-cost.png"))
