"""What the AI verdicts cost: the price arithmetic (a table), and the read-back assets'
metadata from a real Dagster materialisation over result entries as the workers write
them."""

from __future__ import annotations

from typing import Any

import dagster as dg
import pytest

from sentinel_platform.domains.reporting.cost import ROW_NAME, Prices, cost, prices_from
from sentinel_platform.domains.reporting.definitions import ASSETS as REPORTING_ASSETS
from sentinel_platform.resources.settings import SettingsResource
from sentinel_platform.settings import Settings, load_settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import axiom_keys, transaction_keys
from sentinel_platform_tests.harness.cli import transaction_result

MINI = Prices(input=0.15, output=0.60, cached_input=0.075)
CASES = [
    # (input, output, cached, prices, cost)
    (1_000_000, 0, 0, MINI, 0.15),
    (0, 1_000_000, 0, MINI, 0.6),
    (1_000_000, 0, 1_000_000, MINI, 0.075),  # all of the prompt from the cache
    (1_000_000, 0, 500_000, Prices(0.15, 0.60), 0.15),  # no cached price: the input price
    (1117, 46, 1024, MINI, 0.000118),  # OpenAI's documented usage, one call
    (1000, 10, 5000, MINI, 0.000081),  # a cached count above the prompt counts as the prompt
    (1000, 1000, 0, None, None),  # no prices: tokens only
]


@pytest.mark.parametrize(("tokens_in", "tokens_out", "cached", "prices", "expected"), CASES)
def test_cost(
    tokens_in: int, tokens_out: int, cached: int, prices: Prices | None, expected: float | None
) -> None:
    assert cost(tokens_in, tokens_out, cached, prices) == expected


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({}, None),
        ({"analyzer_price_input_per_mtok": "0.15"}, None),  # an output price is needed too
        (
            {"analyzer_price_input_per_mtok": "0.15", "analyzer_price_output_per_mtok": "0.6"},
            Prices(0.15, 0.6),
        ),
    ],
)
def test_prices_from_settings(values: dict[str, str], expected: Prices | None) -> None:
    assert prices_from(load_settings(**values)) == expected


PRICED = {
    "analyzer_price_input_per_mtok": "0.15",
    "analyzer_price_output_per_mtok": "0.60",
}


def _read_back_priced(
    settings: Settings,
    data_resources: dict[str, Any],
    instance: Any,
    asset: str,
    prices: dict[str, str] | None = None,
) -> Any:
    """Materialise the read-back ``asset`` for real with :data:`PRICED` (and ``prices``)
    over the test settings; a failed run returned, not raised."""
    priced = {
        "redis_url": settings.redis_url_value,
        "home": str(settings.home_dir),
        **PRICED,
        **(prices or {}),
    }
    resources = {**data_resources, "settings": SettingsResource(overrides=priced)}
    return dg.materialize(
        REPORTING_ASSETS,
        resources=resources,
        instance=instance,
        selection=[asset],
        raise_on_error=False,
    )


def _verdict(
    driver: str, tokens: tuple[int, int, int] | None, day: str | None, lane: str | None = None
) -> dict[str, str]:
    """A transactions result entry as the worker writes it (``day`` None: as written
    before results carried the data's day)."""
    fields = transaction_result(driver, tokens, model=MODEL)
    if day is not None:
        fields["day"] = day
    if lane is not None:
        fields["lane"] = lane
    return fields


DAY_1, DAY_2 = 1_795_651_200_000, 1_795_737_600_000  # 2026-11-26 and 2026-11-27, 00:00 UTC
MODEL = "gpt-4o-mini-2024-07-18"


@pytest.mark.spark
def test_the_verdicts_read_back_shows_tokens_and_cost_per_data_day_lane_and_model(
    settings: Settings,
    data_resources: dict[str, Any],
    redis_client: RedisClient,
    dagster_instance: Any,
) -> None:
    """The day is the data's (a 2026-11-25 partition decided on 2026-11-26 and 27 is one
    row), else the day the entry was committed; the lane is ``realtime`` unless named."""
    txn = transaction_keys(settings)
    rows = [
        (DAY_1 + 5, "analyzer", (1117, 46, 1024), "2026-11-25", None),
        (DAY_2 + 6, "analyzer", (1117, 46, 1024), "2026-11-25", "realtime"),
        (DAY_1 + 7, "fallback", None, "2026-11-25", None),
        (DAY_1 + 8, "fallback", (1117, 400, 0), "2026-11-25", None),  # cut: billed, no verdict
        (DAY_2 + 5, "analyzer", (2000, 100, 0), None, None),  # no day: the entry id's
        (DAY_2 + 7, "analyzer", (1000, 10, 0), "2026-11-25", "batch"),
    ]
    for millis, driver, tokens, day, lane in sorted(rows, key=lambda r: r[0]):
        redis_client.xadd(txn.results, _verdict(driver, tokens, day, lane), id=f"{millis}-0")
    cached = {"analyzer_price_cached_input_per_mtok": "0.075"}
    result = _read_back_priced(
        settings, data_resources, dagster_instance, "transaction_verdicts", cached
    )
    assert result.success
    (verdicts,) = result.asset_materializations_for_node("transaction_verdicts")
    meta = verdicts.metadata
    tables = {k: meta[k].value for k in ("analyzer_usage", "analyzer_tokens", "analyzer_cost")}
    rows = {
        key: {(r.data["day"], r.data["lane"], r.data["model"]): r.data for r in table.records}
        for key, table in tables.items()
    }
    keys = {
        ("2026-11-25", "realtime", MODEL),
        ("2026-11-25", "batch", MODEL),
        ("2026-11-27", "realtime", MODEL),
    }
    assert all(set(by_key) == keys for by_key in rows.values())
    # two columns, so each table fits its cell in the UI: a figure, then the day, lane, model
    for key, figure in [("analyzer_usage", "verdicts"), ("analyzer_tokens", "tokens")]:
        assert [c.name for c in tables[key].schema.columns] == [figure, ROW_NAME]
    named = {r.data[ROW_NAME] for r in tables["analyzer_cost"].records}
    assert named == {" · ".join(key) for key in keys}
    old_day = ("2026-11-25", "realtime", MODEL)
    assert rows["analyzer_usage"][old_day]["verdicts"] == 2  # and one billed without one
    assert rows["analyzer_tokens"][old_day]["tokens"] == 3351 + 492
    assert rows["analyzer_cost"][old_day]["cost"] == 0.000644
    assert rows["analyzer_cost"][("2026-11-27", "realtime", MODEL)]["cost"] == 0.00036
    assert rows["analyzer_usage"][("2026-11-25", "batch", MODEL)]["verdicts"] == 1
    assert (meta["input_tokens"].value, meta["output_tokens"].value) == (6351, 602)
    assert (meta["cached_input_tokens"].value, meta["unusable"].value) == (2048, 1)
    assert meta["cost"].value == pytest.approx(0.001160)


@pytest.mark.spark
def test_a_stream_without_any_ai_verdict_reads_back_with_prices_set(
    settings: Settings,
    data_resources: dict[str, Any],
    redis_client: RedisClient,
    dagster_instance: Any,
) -> None:
    """Prices set and not one model call on the stream (every event decided by the
    rules): the read-back still materialises, its cost a float zero."""
    axm = axiom_keys(settings)
    for i, risk in enumerate(["low", "high"]):
        event = {"source_id": f"aml-{i}", "domain": "aml", "risk_level": risk}
        redis_client.xadd(axm.results, {**event, "driver_used": "rules"})
    result = _read_back_priced(settings, data_resources, dagster_instance, "compliance_events")
    assert result.success
    (events,) = result.asset_materializations_for_node("compliance_events")
    assert events.metadata["cost"].value == 0.0
    assert events.metadata["analyzer_cost"].value.records == []


#: An openai analyzer's settings: its batch lane's documented share of the price is 0.5.
OPENAI = {
    "analyzer_api": "openai",
    "analyzer_model": "gpt-4o-mini",
    "analyzer_url": "https://api.openai.com/v1",
    "analyzer_api_key": "sk-C0st-T3st-0123456789abcdef",
}


@pytest.mark.parametrize(
    ("values", "share"),
    [
        ({}, 1.0),  # the sentinel API has no batch lane
        (OPENAI, 0.5),  # the provider's documented discount
        ({**OPENAI, "analyzer_batch_price_share": "0.4"}, 0.4),  # set: the setting wins
    ],
)
def test_the_batch_lane_is_priced_at_its_share_of_the_real_time_prices(
    values: dict[str, str], share: float
) -> None:
    prices = prices_from(load_settings(**PRICED, **values))
    assert prices is not None and prices.batch_share == share
    assert prices.of_lane("realtime") == prices
    batch = prices.of_lane("batch")
    assert (batch.input, batch.output) == pytest.approx((0.15 * share, 0.60 * share))
    assert cost(1_000_000, 1_000_000, 0, batch) == pytest.approx(0.75 * share)


@pytest.mark.spark
def test_the_read_back_prices_each_lane_and_shows_what_the_batch_lane_saved(
    settings: Settings,
    data_resources: dict[str, Any],
    redis_client: RedisClient,
    dagster_instance: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Verdicts as the worker writes them, one real time and two through the batch lane:
    the batch row costs half, and ``saved`` is the other half."""
    openai = {k: v for k, v in OPENAI.items() if k != "analyzer_api_key"}
    monkeypatch.setenv("SENTINEL_ANALYZER_API_KEY", OPENAI["analyzer_api_key"])  # never config
    txn = transaction_keys(settings)
    rows = [
        (DAY_1 + 1, (1_000_000, 100_000, 0), None),
        (DAY_1 + 2, (1_000_000, 100_000, 0), "batch"),
        (DAY_1 + 3, (1_000_000, 100_000, 0), "batch"),
    ]
    for millis, tokens, lane in rows:
        fields = _verdict("analyzer", tokens, "2026-11-20", lane)
        redis_client.xadd(txn.results, dict(fields), id=f"{millis}-0")  # type: ignore[arg-type]
    result = _read_back_priced(
        settings, data_resources, dagster_instance, "transaction_verdicts", openai
    )
    assert result.success
    (verdicts,) = result.asset_materializations_for_node("transaction_verdicts")
    meta = verdicts.metadata
    by_lane = {r.data["lane"]: r.data for r in meta["analyzer_cost"].value.records}
    real_time = 0.15 + 0.06  # a million input and 100,000 output tokens
    assert by_lane["realtime"]["cost"] == pytest.approx(real_time)
    assert by_lane["batch"]["cost"] == pytest.approx(2 * real_time * 0.5)
    assert meta["cost"].value == pytest.approx(real_time * 2)
    assert meta["saved"].value == pytest.approx(real_time)
