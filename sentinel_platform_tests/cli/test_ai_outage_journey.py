"""An outage of the model as an operator lives it, in a real browser against the real
``sentinel up``: no verdict is silently second-best.

``sentinel up`` runs with a model API (a real HTTP server answering as OpenAI documents)
and prices set, as docs/analyzer.md recommends. A day's landing file is published through
the publish job launched as the UI launches it. Once the model has decided some of the
day, its server goes away (every connection closed unanswered) for at least 30 s: the
rules decide the rest of the day, each such verdict marked provisional and queued in the
same commit. While the outage lasts, ``sentinel status`` counts the provisional verdicts
and the Dagster UI shows the ``ai_verdicts`` check failing on the stream asset with the
fallbacks' figures (the outage ends only once it has, and not before 30 s). Then the
server comes back, and afterwards:

* every message of the day has a model verdict, the re-screened ones marked
  (``rescreen_of`` naming the provisional verdict they supersede, both kept);
* ``sentinel verdict`` shows a re-screened transaction's two verdicts;
* the reporting job builds with prices set, its cost table priced, and the transactions'
  read-back counts the model's decisions.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from sentinel_platform.settings import Settings
from sentinel_platform.streams.backlog.provisional import RESCREEN_OF, read_provisional
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import transaction_keys
from sentinel_platform_tests.harness.model_api_server import ModelApiServer
from sentinel_platform_tests.harness.platform import (
    Platform,
    land_transactions,
    launch,
    serving_platform,
    wait_for_run,
)
from sentinel_platform_tests.harness.processes import MODEL_NAMES
from sentinel_platform_tests.harness.waits import wait_until

#: A Spark publish of three steps, an outage of at least 30 s, the breaker's cool-down and
#: the re-screen of the day, then a reporting run: minutes on a loaded 2-core machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

ROWS = 400
OUTAGE_S = 30.0
#: The model's verdicts before the outage starts ("mid-run").
BEFORE_OUTAGE = 40
PRICES = {
    "SENTINEL_ANALYZER_PRICE_INPUT_PER_MTOK": "0.15",
    "SENTINEL_ANALYZER_PRICE_OUTPUT_PER_MTOK": "0.60",
}
CHECK_EXECUTIONS = """query($k: AssetKeyInput!) {
  assetCheckExecutions(assetKey: $k, checkName: "ai_verdicts", limit: 50) {
    status timestamp evaluation { severity description } } }"""
MATERIALIZATIONS = """query($k: AssetKeyInput!) { assetOrError(assetKey: $k) { ... on Asset {
  assetMaterializations(limit: 1) { metadataEntries { label __typename
    ... on IntMetadataEntry { intValue } ... on FloatMetadataEntry { floatValue }
    ... on TableMetadataEntry { table { records } } } } } } }"""


@pytest.fixture
def outage_platform(
    settings: Settings,
    settings_env: dict[str, str],
    redis_client: RedisClient,
    model_api_server: ModelApiServer,
) -> Iterator[Platform]:
    """``sentinel up`` whose workers ask ``model_api_server`` (OpenAI's API), prices set;
    SIGTERM at teardown."""
    model_api_server.latency_s = 0.05  # the day takes a while: the outage comes mid-run
    analyzer = {
        "SENTINEL_ANALYZER_API": "openai",
        "SENTINEL_ANALYZER_URL": model_api_server.url,
        "SENTINEL_ANALYZER_MODEL": MODEL_NAMES["openai"],
        "SENTINEL_ANALYZER_API_KEY": "sk-outage-journey-0001",
        "SENTINEL_ANALYZER_BREAKER_COOLDOWN_S": "2",
        **PRICES,
    }
    with serving_platform(settings, settings_env, analyzer) as running:
        yield running


def _day_verdicts(client: RedisClient, settings: Settings) -> dict[str, list[dict[str, str]]]:
    """The results of the landed transactions, by transaction id, oldest first (each
    entry with its id as ``entry_id``)."""
    found: dict[str, list[dict[str, str]]] = {}
    for entry_id, fields in client.xrange(transaction_keys(settings).results):
        if fields.get("txn_id", "").startswith("outage-"):
            found.setdefault(fields["txn_id"], []).append({**fields, "entry_id": entry_id})
    return found


def _model_verdicts(client: RedisClient, settings: Settings) -> int:
    return sum(
        1
        for verdicts in _day_verdicts(client, settings).values()
        for v in verdicts
        if v["driver_used"] == "analyzer"
    )


def _failed_checks_since(platform: Platform, since: float) -> list[dict[str, Any]]:
    """The ``ai_verdicts`` evaluations of `transaction_stream` recorded since ``since``
    that failed."""
    key = {"path": ["transaction_stream"]}
    found = platform.graphql(CHECK_EXECUTIONS, {"k": key})["assetCheckExecutions"]
    return [e for e in found if e["timestamp"] >= since and e["status"] == "FAILED"]


def _the_outage(
    platform: Platform,
    server: ModelApiServer,
    client: RedisClient,
    settings: Settings,
    page: Any,
    screenshots: Path,
) -> dict[str, Any]:
    """Take the server away once the model has decided part of the day; bring it back
    after ``OUTAGE_S`` and once the UI shows the check failing. What the UI showed."""
    wait_until(
        lambda: _model_verdicts(client, settings) >= BEFORE_OUTAGE,
        timeout_s=480,
        interval_s=0.2,
        what=f"{BEFORE_OUTAGE} of the day's verdicts by the model",
    )
    server.down, went = True, time.time()
    try:
        keys = transaction_keys(settings)
        wait_until(
            lambda: read_provisional(client, keys).waiting > 0,
            timeout_s=60,
            interval_s=0.2,
            what="a provisional verdict queued",
        )
        status = platform.sentinel("status")
        assert "provisional:" in status.stdout and "wait for the model" in status.stdout, (
            status.stdout
        )
        (failed, *_rest) = wait_until(
            lambda: _failed_checks_since(platform, went),
            timeout_s=150,
            interval_s=1,
            what="the ai_verdicts check failing in the UI",
        )
        page.goto(f"{platform.url}/assets/transaction_stream?view=checks")
        page.get_by_text("ai_verdicts").first.wait_for()
        page.screenshot(path=str(screenshots / "ai-outage-check.png"))
        wait_until(lambda: time.time() - went >= OUTAGE_S, timeout_s=OUTAGE_S + 1, interval_s=0.2)
        return dict(failed)
    finally:
        server.down = False


def _every_message_has_a_model_verdict(client: RedisClient, settings: Settings) -> bool:
    found = _day_verdicts(client, settings)
    return len(found) == ROWS and all(v[-1]["driver_used"] == "analyzer" for v in found.values())


def _metadata(platform: Platform, asset: str) -> dict[str, Any]:
    reply = platform.graphql(MATERIALIZATIONS, {"k": {"path": [asset]}})["assetOrError"]
    (materialization,) = reply["assetMaterializations"]
    return {entry["label"]: entry for entry in materialization["metadataEntries"]}


def test_an_outage_mid_day_ends_with_every_message_decided_by_the_model(
    outage_platform: Platform,
    model_api_server: ModelApiServer,
    browser: Any,
    screenshots: Path,
    redis_client: RedisClient,
    settings: Settings,
) -> None:
    platform, today = outage_platform, datetime.now(UTC).date().isoformat()
    landed = land_transactions(settings, today, ROWS, "outage")
    screenshots.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 900})
    page.set_default_timeout(60_000)

    publish = launch(platform, "publish_transactions", today)
    failed = _the_outage(platform, model_api_server, redis_client, settings, page, screenshots)
    evaluation = failed["evaluation"]
    assert "rules" in evaluation["description"] and "provisional" in evaluation["description"]
    assert wait_for_run(platform, publish, timeout_s=480) == "SUCCESS"

    # Afterwards: every message of the day has the model's verdict; the re-screened ones
    # name the provisional verdict they supersede, which is kept.
    wait_until(
        lambda: _every_message_has_a_model_verdict(redis_client, settings),
        timeout_s=300,
        interval_s=1,
        what=f"a model verdict for each of the {ROWS} messages",
    )
    verdicts = _day_verdicts(redis_client, settings)
    assert sorted(verdicts) == sorted(landed)
    rescreened = {t: v for t, v in verdicts.items() if RESCREEN_OF in v[-1]}
    assert rescreened, "the outage's fallbacks were re-screened"
    for txn_id, (*earlier, last) in rescreened.items():
        superseded = [v for v in earlier if v["entry_id"] == last[RESCREEN_OF]]
        assert superseded and superseded[0]["provisional"] == "true", (txn_id, earlier, last)
        assert superseded[0]["fallback_cause"] in ("down", "breaker_open"), superseded
    firsts = [v[0] for v in verdicts.values()]
    assert sum(1 for v in firsts if v["driver_used"] == "analyzer") >= BEFORE_OUTAGE
    assert all(len(v) <= 2 for v in verdicts.values()), "at most one re-screen each"
    assert read_provisional(redis_client, transaction_keys(settings)).waiting == 0

    # sentinel verdict shows a re-screened transaction's both verdicts.
    txn_id = sorted(rescreened)[0]
    provisional, final = rescreened[txn_id][-2], rescreened[txn_id][-1]
    shown = platform.sentinel("verdict", txn_id, "--json")
    assert shown.returncode == 0, shown.stderr
    doc = json.loads(shown.stdout)
    assert [v["entry_id"] for v in doc["verdicts"]] == [provisional["entry_id"], final["entry_id"]]
    assert doc["in_force"] == final["entry_id"] and doc["rescreened"] is True
    text = platform.sentinel("verdict", txn_id).stdout
    assert f"provisional, superseded by {final['entry_id']}" in text, text
    assert f"a re-screen of {provisional['entry_id']}" in text, text

    # With prices set, the report builds, its cost priced and the model's decisions counted.
    report = launch(platform, "report_compliance")
    assert wait_for_run(platform, report, timeout_s=480) == "SUCCESS"
    read_back = _metadata(platform, "transaction_verdicts")
    assert read_back["cost"]["floatValue"] > 0, read_back["cost"]
    assert read_back["superseded"]["intValue"] >= len(rescreened), read_back["superseded"]
    costs = [json.loads(r) for r in read_back["analyzer_cost"]["table"]["records"]]
    assert any(
        (r["day"], r["lane"]) == (today, "realtime")
        and r["model"].startswith(MODEL_NAMES["openai"])  # the answer's dated name
        and r["cost"] > 0
        for r in costs
    ), costs
    page.goto(f"{platform.url}/assets/transaction_verdicts")
    table = page.get_by_text("analyzer_cost").first
    table.scroll_into_view_if_needed()
    page.screenshot(path=str(screenshots / "ai-outage-cost.png"))
