"""A trial of models and prompts as an operator runs it, through the real ``sentinel up``:
which model decided, and was it right.

``sentinel up`` runs with three model APIs, each a real HTTP server answering as its
provider documents: the live model (OpenAI's Chat Completions), a fallback model
(Anthropic's Messages, another model) and a shadow (OpenAI's API again, the live model
with a new prompt file: another prompt version) asked about every message. Each
server is a stub model (:mod:`~sentinel_platform_tests.harness.trial_models`) that
decides from the payment it is shown, right on some typologies and wrong on others; the
live one answers ``insufficient_quota`` once it has decided :data:`QUOTA_AFTER` messages.

A generated day (labelled typologies) is published through the publish job launched as
the UI launches it. Then:

* every message is decided by a model, never the rules: the live one's first
  :data:`QUOTA_AFTER`, the fallback's all the others (``analyzer_role``);
* the shadow's verdicts are in the shadow result stream (a job its queue had no room
  for is dropped, so it is measured on the messages it answered);
* the ``verdict_quality`` partition of the day, materialised through GraphQL, stores per
  role, model and prompt version the confusion matrix the test expects from the generated
  rows' labels and typologies and each stub's rule, computed here, never read from the
  asset; the shadow's row has the live decisions' matrix on its messages beside its own,
  and the run's ``typologies`` table what each group flagged of each typology;
* the Dagster UI's plot of the partitions' figures shows one of them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pyarrow.parquet as pq
import pytest

from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import shadow_results_key, transaction_keys
from sentinel_platform_tests.harness.model_api_server import ModelApiServer, serving_model_api
from sentinel_platform_tests.harness.platform import (
    Platform,
    launch,
    serving_platform,
    wait_for_run,
)
from sentinel_platform_tests.harness.processes import MODEL_NAMES, REPO_ROOT
from sentinel_platform_tests.harness.trial_models import (
    FALLBACK,
    OUTCOMES,
    PRIMARY,
    SHADOW,
    Group,
    expected_by_typology,
    expected_live_on,
    expected_matrices,
)
from sentinel_platform_tests.harness.waits import wait_until

#: Two Spark runs (a publish of three steps, the quality report), ``sentinel up``'s start
#: and a browser, on a loaded 2-core machine.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

#: Yesterday: among the partitions the UI plots (the latest 120), and not today's, which
#: the quality asset's automation may refresh while the test reads it.
DAY = (datetime.now(UTC).date() - timedelta(days=1)).isoformat()
#: About 6-10 rows of each typology (their base rates are 6-10 per mille).
ROWS = 1000
SOURCE = {"rows": ROWS, "spark_partitions": 2}
SMALL = {"ops": {"raw_transactions": {"config": SOURCE}}}
#: The live model's verdicts before its quota is spent.
QUOTA_AFTER = 400
SHADOW_FRACTION = 1.0
#: Two calls at once: the shadow's two threads keep up with the live path, so its queue
#: seldom overflows (a job it has no room for is dropped, never waited for).
CONCURRENCY = "2"
#: The shadow's prompt: the packaged one and a sentence more (another prompt version).
PROMPT = REPO_ROOT / "workers" / "analyzer" / "prompts" / "transactions.txt"
NEW_PROMPT_LINE = "\nA USD payment of 495.00 to 499.99 is structuring: flag it.\n"
#: The roles in the order the test prefers a figure of theirs for the plot.
ROLES = ("primary", "fallback", "shadow")
LATEST = """query($k: AssetKeyInput!, $p: [String!]) { assetOrError(assetKey: $k) {
  ... on Asset { assetMaterializations(partitions: $p, limit: 1) { partition
    metadataEntries { label __typename ... on IntMetadataEntry { intValue }
      ... on FloatMetadataEntry { floatValue }
      ... on TableMetadataEntry { table { records } } } } } } }"""
#: The data a plot of the UI draws, read from its chart component (a canvas has no text):
#: the nearest React component above the plot's canvas whose props are the plot's.
PLOTTED = """([label]) => {
  const heading = [...document.querySelectorAll('*')].find(
    (e) => e.children.length === 0 && e.textContent === label);
  let box = heading;
  while (box && !box.querySelector('canvas')) box = box.parentElement;
  const canvas = box && box.querySelector('canvas');
  if (!canvas) return null;
  const key = Object.keys(canvas).find((k) => k.startsWith('__reactFiber$'));
  for (let f = canvas[key]; f; f = f.return) {
    const p = f.memoizedProps;
    if (p && p.label === label && p.data && p.data.values)
      return p.data.values.map((v) => ({x: String(v.x), y: v.y}));
  }
  return null;
}"""


@pytest.fixture
def servers(model_api_server: ModelApiServer) -> Iterator[dict[str, ModelApiServer]]:
    """The three stub models by role, each deciding by its rule; the live one's quota
    spent after :data:`QUOTA_AFTER` verdicts."""
    with serving_model_api() as fallback, serving_model_api() as shadow:
        model_api_server.decide, model_api_server.quota_after = PRIMARY.decide, QUOTA_AFTER
        fallback.decide, shadow.decide = FALLBACK.decide, SHADOW.decide
        yield {"primary": model_api_server, "fallback": fallback, "shadow": shadow}


@pytest.fixture
def trial_platform(
    settings: Settings,
    settings_env: dict[str, str],
    redis_client: RedisClient,
    servers: dict[str, ModelApiServer],
    tmp_path: Path,
) -> Iterator[Platform]:
    """``sentinel up`` with the live model, its fallback and a shadow on a new prompt."""
    prompt = tmp_path / "transactions-v2.txt"
    prompt.write_text(PROMPT.read_text() + NEW_PROMPT_LINE)
    analyzers = {
        "SENTINEL_ANALYZER_API": "openai",
        "SENTINEL_ANALYZER_URL": servers["primary"].url,
        "SENTINEL_ANALYZER_MODEL": MODEL_NAMES["openai"],
        "SENTINEL_ANALYZER_API_KEY": "sk-trial-live-0123456789",
        "SENTINEL_ANALYZER_FALLBACK_API": "anthropic",
        "SENTINEL_ANALYZER_FALLBACK_URL": servers["fallback"].url.removesuffix("/v1"),
        "SENTINEL_ANALYZER_FALLBACK_MODEL": MODEL_NAMES["anthropic"],
        "SENTINEL_ANALYZER_FALLBACK_API_KEY": "sk-ant-trial-fallback-0123",
        "SENTINEL_ANALYZER_SHADOW_API": "openai",
        "SENTINEL_ANALYZER_SHADOW_URL": servers["shadow"].url,
        "SENTINEL_ANALYZER_SHADOW_MODEL": MODEL_NAMES["openai"],
        "SENTINEL_ANALYZER_SHADOW_API_KEY": "sk-trial-shadow-0123456789",
        "SENTINEL_ANALYZER_SHADOW_TRANSACTIONS_PROMPT_FILE": str(prompt),
        "SENTINEL_ANALYZER_SHADOW_FRACTION": str(SHADOW_FRACTION),
        "SENTINEL_WORKER_CONCURRENCY": CONCURRENCY,
    }
    with serving_platform(settings, settings_env, analyzers) as running:
        yield running


def _truth(settings: Settings) -> dict[str, tuple[bool, str]]:
    """Each generated row's label and typology, as the day's raw Parquet stores them."""
    raw = pq.read_table(settings.home_dir / "data" / "raw_transactions" / DAY)
    return {
        str(row["id"]): (bool(row["is_threat"]), str(row["typology"]))
        for row in raw.select(["id", "is_threat", "typology"]).to_pylist()
    }


def _verdicts(client: RedisClient, key: str, ids: set[str]) -> dict[str, list[dict[str, str]]]:
    """The entries of ``key`` about the transactions ``ids``, by id, oldest first."""
    found: dict[str, list[dict[str, str]]] = {}
    for _, fields in cast(list[tuple[str, dict[str, str]]], client.xrange(key)):
        if fields.get("txn_id") in ids:
            found.setdefault(fields["txn_id"], []).append(fields)
    return found


def _settled(
    client: RedisClient, results: str, shadow: str, ids: set[str], server: ModelApiServer
) -> Callable[[], bool]:
    """A condition: every message of ``ids`` has its verdict, and the shadow stream holds
    every verdict the shadow's server gave (a message offered again after a busy wait is
    asked again), no call unanswered, at two polls in a row (a job still queued is asked
    within the next)."""
    last: list[int] = []

    def settled() -> bool:
        seen = server.seen()
        answered = sum(1 for r in seen if r.get("status") == 200)
        written = sum(len(v) for v in _verdicts(client, shadow, ids).values())
        done = len(_verdicts(client, results, ids)) == len(ids)
        steady = done and answered == written and all("status" in r for r in seen)
        was, last[:] = last[:], [written] if steady else []
        return steady and was == [written]

    return settled


def _group(entry: dict[str, str], role: str) -> Group:
    return (role, entry["model"], entry["prompt_version"])


def _stored(settings: Settings) -> dict[Group, dict[str, Any]]:
    """The stored rows of the day's ``verdict_quality``, by role, model, prompt version."""
    rows = pq.read_table(settings.home_dir / "data" / "verdict_quality" / DAY).to_pylist()
    return {(row["role"], row["model"], row["prompt_version"]): row for row in rows}


def _cells(row: dict[str, Any], prefix: str = "") -> dict[str, int]:
    return {name: int(row[prefix + name]) for name in OUTCOMES}


def _figure(cells: dict[str, int], name: str) -> float | None:
    """``precision`` or ``recall`` of ``cells``, to 4 places, as operators read them."""
    said = cells["tp"] + (cells["fp"] if name == "precision" else cells["fn"])
    return round(cells["tp"] / said, 4) if said else None


def _metadata(platform: Platform) -> dict[str, Any]:
    """The metadata of the day's latest ``verdict_quality`` materialisation: numbers as
    numbers, tables as their records."""
    reply = platform.graphql(LATEST, {"k": {"path": ["verdict_quality"]}, "p": [DAY]})
    (latest,) = reply["assetOrError"]["assetMaterializations"]
    found: dict[str, Any] = {}
    for e in latest["metadataEntries"]:
        if "table" in e:
            found[e["label"]] = [json.loads(r) for r in e["table"]["records"]]
        else:
            found[e["label"]] = e.get("floatValue", e.get("intValue"))
    return found


def _plot_label(name: str, group: Group) -> str:
    """The plot of figure ``name`` of a group: the primary's by model and prompt version,
    any other role's with the role first."""
    role, model, version = group
    return " · ".join([name, *([] if role == "primary" else [role]), model, version])


def _read_plot(platform: Platform, page: Any, label: str, screenshots: Path) -> list[dict]:
    """The points the UI's plot of ``label`` across partitions draws (asset overview,
    Plots, by partition), with a screenshot of it."""
    page.goto(f"{platform.url}/assets/verdict_quality")
    page.get_by_role("button", name="Plots").click()
    shot = str(screenshots / "model-trial-quality-plot.png")
    try:
        page.get_by_text(label, exact=True).first.scroll_into_view_if_needed()
        points = wait_until(
            lambda: page.evaluate(PLOTTED, [label]), timeout_s=30, interval_s=0.5, what=label
        )
    finally:
        page.screenshot(path=shot)
    return list(points)


def test_a_model_trial_is_measured_per_model_and_prompt_version(
    trial_platform: Platform,
    servers: dict[str, ModelApiServer],
    browser: Any,
    screenshots: Path,
    redis_client: RedisClient,
    settings: Settings,
) -> None:
    platform, keys = trial_platform, transaction_keys(settings)
    publish = launch(platform, "publish_transactions", DAY, SMALL)
    assert wait_for_run(platform, publish, timeout_s=480) == "SUCCESS"
    truth = _truth(settings)
    ids = set(truth)
    assert len(ids) == ROWS

    # Every message decided by a model: the live one until its quota ran out, then the
    # fallback; the shadow asked beside them (a job its queue has no room for is dropped,
    # never waited for).
    shadow_key = shadow_results_key(keys)
    wait_until(
        _settled(redis_client, keys.results, shadow_key, ids, servers["shadow"]),
        timeout_s=180,
        interval_s=1,
        what=f"{ROWS} verdicts, and the shadow's written",
    )
    live = _verdicts(redis_client, keys.results, ids)
    assert all(len(v) == 1 for v in live.values()), "each message decided once"
    decided = {t: v[0] for t, v in live.items()}
    assert {e["driver_used"] for e in decided.values()} == {"analyzer"}, "the rules decided none"
    roles = [e["analyzer_role"] for e in decided.values()]
    assert roles.count("primary") == QUOTA_AFTER and roles.count("fallback") == ROWS - QUOTA_AFTER
    refused = [r for r in servers["primary"].seen() if r.get("status") == 429]
    assert refused, "the live model's quota was spent"
    assert all(e["label"] == str(truth[t][0]).lower() for t, e in decided.items())
    shadowed = {t: v[-1] for t, v in _verdicts(redis_client, shadow_key, ids).items()}
    assert shadowed and set(shadowed) <= ids
    versions = {e["prompt_version"] for e in shadowed.values()}
    assert len(versions) == 1 and versions.isdisjoint(e["prompt_version"] for e in decided.values())

    role_of = {t: e["analyzer_role"] for t, e in decided.items()}
    live_groups = [(t, _group(e, role_of[t])) for t, e in decided.items()]
    shadow_groups = [(t, _group(e, "shadow")) for t, e in shadowed.items()]
    expected = expected_matrices([*live_groups, *shadow_groups], truth)
    assert {g[0] for g in expected} == {"primary", "fallback", "shadow"}

    # The day's quality, materialised as the UI does: exactly the expected matrices, the
    # shadow's beside the live decisions on the same messages, and no row of the rules.
    report = launch(platform, "report_quality", DAY)
    assert wait_for_run(platform, report, timeout_s=480) == "SUCCESS"
    stored = _stored(settings)
    assert {g: _cells(row) for g, row in stored.items()} == expected
    (shadow_row,) = [row for g, row in stored.items() if g[0] == "shadow"]
    assert _cells(shadow_row, "live_") == expected_live_on(shadowed, role_of, truth)
    assert shadow_row["verdicts"] == len(shadowed)
    metadata = _metadata(platform)
    by_typology = {
        (r["role"], r["model"], r["prompt_version"], r["typology"]): (r["messages"], r["flagged"])
        for r in metadata["typologies"]
    }
    assert by_typology == expected_by_typology([*live_groups, *shadow_groups], truth)

    # The UI plots a model's figure across the partitions: the day's point is expected.
    label, figure = next(
        (_plot_label(name, group), _figure(cells, name))
        for group, cells in sorted(expected.items(), key=lambda g: ROLES.index(g[0][0]))
        for name in ("recall", "precision")
        if _figure(cells, name) is not None
    )
    assert metadata[label] == pytest.approx(figure, abs=1e-4)
    screenshots.mkdir(parents=True, exist_ok=True)
    page = browser.new_page(viewport={"width": 1400, "height": 1000})
    page.set_default_timeout(60_000)
    points = _read_plot(platform, page, label, screenshots)
    (day,) = [p for p in points if p["x"] == DAY]
    assert day["y"] == pytest.approx(figure, abs=1e-4), points
