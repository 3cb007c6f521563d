"""``verdict_quality`` materialised for one day on a real Redis: result entries written in
the contract's shape (label, rules_is_threat, driver, analyzer_role, model,
prompt_version) and shadow entries as the shadow lane writes them, the confusion matrix
per role, model and prompt version against the truth and the rules, the shadow beside
the live decisions on the same messages, the plotted figures, and the warning when a
model is worse than the rules (a shadow: or than the live model)."""

from __future__ import annotations

from typing import Any

import dagster as dg
import pytest

from sentinel_platform.domains.reporting.quality_asset import QUALITY_CHECK, verdict_quality
from sentinel_platform.domains.transactions.assets import enriched_transactions
from sentinel_platform.schemas import DEMO_FIELD, DEMO_VALUE, Transaction
from sentinel_platform.settings import Settings
from sentinel_platform.storage_uri import join
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import shadow_results_key, transaction_keys
from sentinel_platform_tests.workers.processors.test_transactions import BASE
from workers.analyzer import Assessment, Usage
from workers.analyzer.lanes.shadow_record import shadow_entry

pytestmark = pytest.mark.spark

DAY = "2026-11-21"
TRUE, FALSE = "true", "false"


def _entry(
    i: int, driver: str, label: str | None, said: str, rules: str, day: str = DAY, **extra: str
) -> dict[str, str]:
    """A transactions result entry as the worker writes it."""
    fields = {
        "txn_id": f"t-{i}",
        "merchant": "RapidRemit",
        "amount": "497.10",
        "currency": "USD",
        "is_threat": said,
        "risk_level": "high" if said == TRUE else "low",
        "driver_used": driver,
        "processed_at": f"{day}T08:00:00.000Z",
        "source_message_id": f"{1700000000000 + i}-0",
        "day": day,
        "rules_is_threat": rules,
        "rules_risk_level": "high" if rules == TRUE else "low",
        **extra,
    }
    if label is not None:
        fields["label"] = label
    return fields


def _model(
    name: str, prompt: str, latency_ms: int | None = None, role: str | None = None
) -> dict[str, str]:
    fields = {
        **({} if role is None else {"analyzer_role": role}),
        "model": name,
        "prompt_version": prompt,
        "narrative": "n",
        "input_tokens": "100",
        "output_tokens": "20",
    }
    return fields if latency_ms is None else {**fields, "latency_ms": str(latency_ms)}


def _write(redis_client: RedisClient, settings: Settings) -> None:
    """m1 (prompt p1) worse than the rules on its messages; m2 (p2) catching two threats
    the rules miss; a provisional fallback superseded by m1's re-screen; a final
    fallback; another day's and the demo's entries, which do not count."""
    results = transaction_keys(settings).results
    add = lambda fields: redis_client.xadd(results, fields)  # noqa: E731
    m1 = [  # (label, said, rules): tp 3, fn 1, fp 1, tn 5, with latencies 100..1000 ms
        *[(TRUE, TRUE, TRUE)] * 3,
        (TRUE, FALSE, TRUE),
        (FALSE, TRUE, FALSE),
        *[(FALSE, FALSE, FALSE)] * 5,
    ]
    for i, (label, said, rules) in enumerate(m1):  # half say their role, half predate it
        role = "primary" if i % 2 else None
        add(_entry(i, "analyzer", label, said, rules, **_model("m1", "p1", 100 * (i + 1), role)))
    add(_entry(20, "analyzer", None, FALSE, FALSE, **_model("m1", "p1")))  # no truth
    fell = add(_entry(21, "fallback", TRUE, TRUE, TRUE, fallback_cause="down", provisional="true"))
    rescreen = {**_model("m1", "p1"), "rescreen_of": str(fell)}
    add(_entry(21, "analyzer", TRUE, TRUE, TRUE, **rescreen))  # supersedes it: tp
    add(_entry(22, "fallback", FALSE, FALSE, FALSE, fallback_cause="refused"))
    m2 = _model("m2", "p2", role="fallback")  # the second model, before the rules
    for i in range(30, 32):  # a scam the rules miss, caught
        add(_entry(i, "analyzer", TRUE, TRUE, FALSE, **m2))
    for i in range(32, 34):
        add(_entry(i, "analyzer", FALSE, FALSE, FALSE, **m2))
    add(_entry(40, "analyzer", TRUE, FALSE, TRUE, day="2026-11-22", **_model("m1", "p1")))
    add({**_entry(41, "analyzer", TRUE, FALSE, TRUE, **_model("m1", "p1")), DEMO_FIELD: DEMO_VALUE})


def _shadow(redis_client: RedisClient, settings: Settings) -> None:
    """The shadow s1 (prompt p9) on m1's ten messages and on m2's t-30: it catches t-0
    and t-1 of the four threats, flags the harmless t-4 and misses t-30; asked twice
    about t-0 (its newest verdict counts). s1 with prompt p10 catches t-30. Its verdicts
    on a message without a live decision, on another day and the demo's do not count."""
    shadow = shadow_results_key(transaction_keys(settings))

    def add(i: int, said: bool, prompt: str = "p9", label: bool = False, **extra: str) -> None:
        day = extra.pop("day", DAY)
        txn = Transaction.model_validate(
            {**BASE, "id": f"t-{i}", "timestamp": f"{day}T08:00:00Z", "is_threat": label}
        )
        verdict = Assessment(said, "high" if said else "low", "n", "s1", prompt, Usage(50, 10))
        entry: dict[Any, Any] = {**shadow_entry(txn, verdict), **extra}
        redis_client.xadd(shadow, entry)

    labels = [True] * 4 + [False] * 6
    add(0, False, label=True)  # superseded by its newer verdict below
    for i, label in enumerate(labels):
        add(i, i in (0, 1, 4), label=label)
    add(30, False, label=True)
    add(30, True, "p10", label=True)
    add(99, True, label=True)  # no live decision
    add(40, False, label=True, day="2026-11-22")
    add(41, False, label=True, **{DEMO_FIELD: DEMO_VALUE})


def _typologies(spark: Any, settings: Settings) -> None:
    """The day's enriched transactions as the IO manager stores them (only the columns
    read): t-0..t-3 structuring, t-30 and t-31 a scam the rules miss, the rest ordinary."""
    kinds = {0: "structuring", 1: "structuring", 2: "structuring", 3: "structuring"}
    kinds |= {30: "scam_story", 31: "scam_story"}
    ids = [*range(10), 20, 21, 22, *range(30, 34)]
    rows = [(f"t-{i}", kinds.get(i, "ordinary")) for i in ids]
    uri = join(settings.data_uri, enriched_transactions.key.path[-1], DAY)
    spark.createDataFrame(rows, "id string, typology string").write.parquet(uri)


def test_a_days_quality_per_model_and_prompt_against_the_truth_and_the_rules(
    settings: Settings,
    data_resources: dict[str, Any],
    redis_client: RedisClient,
    dagster_instance: Any,
    spark: Any,
) -> None:
    _write(redis_client, settings)
    _shadow(redis_client, settings)
    _typologies(spark, settings)
    result = dg.materialize(
        [verdict_quality], resources=data_resources, instance=dagster_instance, partition_key=DAY
    )
    assert result.success
    rows = {
        (row["role"], row["driver"], row["model"], row["prompt_version"]): row.asDict()
        for row in result.output_for_node("verdict_quality").collect()
    }
    assert set(rows) == {
        ("primary", "analyzer", "m1", "p1"),
        ("fallback", "analyzer", "m2", "p2"),
        ("-", "fallback", "-", "-"),
        ("shadow", "analyzer", "s1", "p9"),
        ("shadow", "analyzer", "s1", "p10"),
    }
    m1, m2, fallback = (
        rows["primary", "analyzer", "m1", "p1"],
        rows["fallback", "analyzer", "m2", "p2"],
        rows["-", "fallback", "-", "-"],
    )
    cells = ("verdicts", "labelled", "tp", "fp", "tn", "fn")
    assert [m1[c] for c in cells] == [12, 11, 4, 1, 5, 1], "the re-screen counts, not its fallback"
    assert [m2[c] for c in cells] == [4, 4, 2, 0, 2, 0]
    assert [fallback[c] for c in cells] == [1, 1, 0, 0, 1, 0]
    assert (m1["precision"], m1["recall"], m1["f1"]) == (0.8, 0.8, 0.8)
    assert (m1["rules_precision"], m1["rules_recall"]) == (1.0, 1.0)
    assert (m1["agreement"], m2["agreement"]) == (0.8333, 0.5)
    assert (m2["rules_precision"], m2["rules_recall"]) == (None, 0.0)
    assert m1["fallback_share"] == round(1 / 17, 4)
    assert m1["tokens_per_verdict"] == 120.0 and m1["cost_per_verdict"] is None  # no prices
    assert (m1["latency_p50_ms"], m1["latency_p95_ms"]) == (500.0, 1000.0)
    assert all(m[c] is None for m in (m1, m2, fallback) for c in ("live_tp", "live_recall"))

    shadow, trial = rows["shadow", "analyzer", "s1", "p9"], rows["shadow", "analyzer", "s1", "p10"]
    assert [shadow[c] for c in cells] == [11, 11, 2, 1, 5, 3], "t-0..t-9 and t-30, once each"
    assert [shadow[f"live_{c}"] for c in ("tp", "fp", "tn", "fn")] == [4, 1, 5, 1]
    assert [shadow[f"rules_{c}"] for c in ("tp", "fp", "tn", "fn")] == [4, 0, 6, 1]
    assert (shadow["precision"], shadow["recall"]) == (0.6667, 0.4)
    assert (shadow["live_precision"], shadow["live_recall"], shadow["live_f1"]) == (0.8, 0.8, 0.8)
    assert (shadow["rules_precision"], shadow["rules_recall"]) == (1.0, 0.8)
    assert shadow["agreement"] == round(8 / 11, 4)
    assert shadow["tokens_per_verdict"] == 60.0 and shadow["fallback_share"] == m1["fallback_share"]
    assert [trial[c] for c in ("verdicts", "tp", "live_tp", "rules_fn")] == [1, 1, 1, 1]

    (materialization,) = result.asset_materializations_for_node("verdict_quality")
    meta = {key: value.value for key, value in materialization.metadata.items()}
    assert (meta["verdicts"], meta["labelled"]) == (17, 16)
    assert (meta["precision"], meta["recall"]) == (round(6 / 7, 4), round(6 / 7, 4))
    assert (meta["rules_precision"], meta["rules_recall"]) == (1.0, round(5 / 7, 4))
    assert (meta["precision · m1 · p1"], meta["recall · fallback · m2 · p2"]) == (0.8, 1.0)
    assert (meta["recall · shadow · s1 · p9"], meta["live_recall · shadow · s1 · p9"]) == (0.4, 0.8)
    table = materialization.metadata["quality"]
    assert isinstance(table, dg.TableMetadataValue) and len(table.value.records) == 5
    typologies = materialization.metadata["typologies"]
    assert isinstance(typologies, dg.TableMetadataValue)
    counted = {
        tuple(r.data[c] for c in ("role", "model", "prompt_version", "typology")): tuple(
            r.data[c] for c in ("messages", "flagged", "rules_flagged")
        )
        for r in typologies.value.records
    }
    assert counted == {
        ("primary", "m1", "p1", "structuring"): (4, 3, 4),
        ("primary", "m1", "p1", "ordinary"): (8, 2, 1),
        ("fallback", "m2", "p2", "scam_story"): (2, 2, 0),
        ("fallback", "m2", "p2", "ordinary"): (2, 0, 0),
        ("-", "-", "-", "ordinary"): (1, 0, 0),
        ("shadow", "s1", "p9", "structuring"): (4, 2, 4),
        ("shadow", "s1", "p9", "ordinary"): (6, 1, 0),
        ("shadow", "s1", "p9", "scam_story"): (1, 0, 0),
        ("shadow", "s1", "p10", "scam_story"): (1, 1, 0),
    }, "the shadow misses structuring the rules catch; m2 catches the scam they miss"

    (check,) = result.get_asset_check_evaluations()
    assert check.check_name == QUALITY_CHECK and not check.passed
    assert check.severity == dg.AssetCheckSeverity.WARN
    shortfalls = check.metadata["shortfalls"].value
    assert shortfalls == {
        "m1 · p1": "recall 0.800 below the rules' 1.000; precision 0.800 below the rules' 1.000",
        "shadow · s1 · p9": "recall 0.400 below the rules' 0.800; "
        "precision 0.667 below the rules' 1.000; "
        "recall 0.400 below the live model's 0.800; precision 0.667 below the live model's 0.800",
    }, "m2 beats the rules on its messages, and so does s1 with p10"


def test_a_day_without_verdicts_is_empty_and_its_check_passes_saying_so(
    data_resources: dict[str, Any], redis_client: RedisClient, dagster_instance: Any
) -> None:
    assert redis_client.dbsize() == 0  # a fresh server: no results at all
    result = dg.materialize(
        [verdict_quality], resources=data_resources, instance=dagster_instance, partition_key=DAY
    )
    assert result.success
    assert result.output_for_node("verdict_quality").count() == 0
    (materialization,) = result.asset_materializations_for_node("verdict_quality")
    assert materialization.metadata["verdicts"].value == 0
    assert "precision" not in materialization.metadata, "an unknown figure is not plotted as 0"
    assert "typologies" not in materialization.metadata, "no enriched partition that day"
    (check,) = result.get_asset_check_evaluations()
    assert check.passed and "nothing to measure" in str(check.metadata["note"].value)


def test_the_cost_per_verdict_prices_each_lanes_tokens_at_its_price(
    settings: Settings,
    data_resources: dict[str, Any],
    redis_client: RedisClient,
    dagster_instance: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two real-time and two batch-lane verdicts of one model and prompt, 1,000 prompt
    and 100 completion tokens each: the batch ones cost half, as the cost report says."""
    monkeypatch.setenv("SENTINEL_ANALYZER_PRICE_INPUT_PER_MTOK", "1.0")
    monkeypatch.setenv("SENTINEL_ANALYZER_PRICE_OUTPUT_PER_MTOK", "4.0")
    monkeypatch.setenv("SENTINEL_ANALYZER_BATCH_PRICE_SHARE", "0.5")
    results = transaction_keys(settings).results
    tokens = {"input_tokens": "1000", "output_tokens": "100"}
    for i in range(4):
        lane = {"lane": "batch"} if i >= 2 else {}
        said = {**_model("m1", "p1"), **tokens, **lane}
        redis_client.xadd(results, _entry(i, "analyzer", TRUE, TRUE, TRUE, **said))
    result = dg.materialize(
        [verdict_quality], resources=data_resources, instance=dagster_instance, partition_key=DAY
    )
    assert result.success
    [row] = result.output_for_node("verdict_quality").collect()
    realtime = (1000 * 1.0 + 100 * 4.0) / 1_000_000
    expected = (2 * realtime + 2 * realtime * 0.5) / 4
    assert row["verdicts"] == 4 and row["input_tokens"] == 4000
    assert abs(row["cost_per_verdict"] - expected) < 1e-9, (row["cost_per_verdict"], expected)
