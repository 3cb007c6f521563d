"""Who decided each message: the read-backs keep why (narrative, model, tokens, cause,
day), keep a provisional verdict a re-screen superseded beside the model's, and count the
model's; a table cell's text; all through a real Dagster materialisation over result
entries written in the contract's shape."""

from __future__ import annotations

from typing import Any

import dagster as dg
import pytest

from sentinel_platform.domains.reporting.decisions import THREAT_NAME, short
from sentinel_platform.domains.reporting.definitions import ASSETS as REPORTING_ASSETS
from sentinel_platform.settings import Settings
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import axiom_keys, transaction_keys


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        (None, 10, ""),
        ("short", 10, "short"),
        ("exactly 10", 10, "exactly 10"),
        ("one word too many", 10, "one word…"),
    ],
)
def test_a_cell_is_cut_with_an_ellipsis(text: str | None, limit: int, expected: str) -> None:
    assert short(text, limit) == expected


MODEL = {
    "model": "gpt-4o-mini-2024-07-18",
    "prompt_version": "3f2a9c1e",
    "input_tokens": "1117",
    "output_tokens": "46",
    "cached_input_tokens": "1024",
}


def _verdict(i: int, threat: bool, driver: str, **extra: str) -> dict[str, str]:
    """A transactions result entry as the worker writes it, on 2026-11-26's data."""
    return {
        "txn_id": f"t-{i}",
        "merchant": "RapidRemit",
        "amount": "497.10",
        "currency": "USD",
        "is_threat": "true" if threat else "false",
        "risk_level": "high" if threat else "low",
        "driver_used": driver,
        "processed_at": "2026-11-26T08:00:00.000Z",
        "source_message_id": f"{1700000000000 + i}-0",
        "day": "2026-11-26",
        **extra,
    }


PROVISIONAL = {"fallback_cause": "down", "provisional": "true"}


@pytest.mark.spark
def test_a_rescreened_verdict_supersedes_the_provisional_one_and_both_are_kept(
    settings: Settings,
    data_resources: dict[str, Any],
    redis_client: RedisClient,
    dagster_instance: Any,
) -> None:
    txn, axm = transaction_keys(settings), axiom_keys(settings)
    # t-0: the rules said no threat while the model was down; the re-screen said threat.
    first = redis_client.xadd(txn.results, _verdict(0, False, "fallback", **PROVISIONAL))
    # t-1: still provisional (not re-screened yet); t-2: the model's verdict at once.
    redis_client.xadd(txn.results, _verdict(1, False, "fallback", **PROVISIONAL))
    narrative = "Round amount to a remittance merchant flagged for structuring. " * 5
    redis_client.xadd(txn.results, _verdict(2, True, "analyzer", narrative="plain", **MODEL))
    second = redis_client.xadd(
        txn.results,
        _verdict(0, True, "analyzer", narrative=narrative, rescreen_of=first, **MODEL),
    )
    first, second = str(first), str(second)
    event = {"source_id": "aml-1", "domain": "aml", "risk_level": "low", "day": "2026-11-26"}
    redis_client.xadd(axm.results, {**event, "driver_used": "rules"})

    result = dg.materialize(REPORTING_ASSETS, resources=data_resources, instance=dagster_instance)
    assert result.success
    rows = {
        row["stream_id"]: row.asDict()
        for row in result.output_for_node("transaction_verdicts").collect()
    }
    assert len(rows) == 4  # the superseded verdict is kept
    assert rows[first]["superseded_by"] == second
    assert (rows[first]["fallback_cause"], rows[first]["provisional"]) == ("down", True)
    kept = rows[second]
    assert (kept["superseded_by"], kept["rescreen_of"], kept["is_threat"]) == (None, first, True)
    assert (kept["narrative"], kept["model"], kept["prompt_version"]) == (
        narrative,
        MODEL["model"],
        "3f2a9c1e",
    )
    assert (kept["input_tokens"], kept["output_tokens"], kept["cached_input_tokens"]) == (
        1117,
        46,
        1024,
    )
    assert (kept["day"], kept["driver_used"], kept["provisional"]) == (
        "2026-11-26",
        "analyzer",
        False,
    )

    (verdicts,) = result.asset_materializations_for_node("transaction_verdicts")
    meta = verdicts.metadata
    counts = (meta["decisions"].value, meta["superseded"].value, meta["provisional"].value)
    assert counts == (3, 1, 1)
    threats = meta["threats"].value.records
    # two columns, so the table fits its cell in the UI: who and when, and the narrative
    assert [c.name for c in meta["threats"].value.schema.columns] == [THREAT_NAME, "narrative"]
    assert [r.data["txn_id"] for r in threats] == ["t-0", "t-2"]  # the newest entry first
    assert (threats[0].data["by"], threats[0].data["narrative"]) == (
        MODEL["model"],
        short(narrative),
    )
    assert threats[0].data["narrative"].endswith("…")

    (report,) = result.asset_materializations_for_node("compliance_report")
    assert report.metadata["verdicts"].value == 3
    (merchant,) = report.metadata["threats_by_merchant"].value.records
    assert (merchant.data["verdicts"], merchant.data["threats"]) == (3, 2)
