"""``sentinel status`` (the real command, a subprocess) measures the last hours' model
verdicts against the truth and the rules, per role, model and prompt version, from result
entries written in the contract's shape, and the shadow's verdicts (as the shadow lane
writes them) beside the live decisions on the same messages; the summary and the line
from tables of cases."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from sentinel_platform.cli.status_quality import line
from sentinel_platform.schemas import DEMO_FIELD, DEMO_VALUE, Transaction
from sentinel_platform.streams.backlog.recent_quality import summarise, summarise_shadow
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys, shadow_results_key
from sentinel_platform_tests.harness.cli import CliResult, status_of_stream, transaction_result
from sentinel_platform_tests.workers.processors.test_transactions import BASE
from workers.analyzer import Assessment
from workers.analyzer.lanes.shadow_record import shadow_entry

MODEL = {"model": "m1", "prompt_version": "p1", "narrative": "n"}


def _result(label: str | None, said: str, rules: str, **extra: str) -> dict[Any, Any]:
    """A transactions result entry: the model's verdict ``said``, the rules' ``rules``."""
    fields = {
        **transaction_result("analyzer"),
        **MODEL,
        "is_threat": said,
        "rules_is_threat": rules,
        "rules_risk_level": "high" if rules == "true" else "low",
        **extra,
    }
    return fields if label is None else {**fields, "label": label}


def test_status_shows_the_models_precision_and_recall_beside_the_rules(
    sentinel: Callable[..., CliResult],
    streams_alive: None,
    redis_client: RedisClient,
    tx_keys: StreamKeys,
) -> None:
    rows = [  # tp 2, fn 1 (the rules caught it), fp 1, tn 2, one without truth
        ("true", "true", "true"),
        ("true", "true", "false"),
        ("true", "false", "true"),
        ("false", "true", "false"),
        ("false", "false", "false"),
        ("false", "false", "false"),
        (None, "false", "false"),
    ]
    for i, (label, said, rules) in enumerate(rows):
        redis_client.xadd(tx_keys.results, _result(label, said, rules, txn_id=f"t-{i}"))
    fallback: dict[Any, Any] = {**transaction_result("fallback"), "label": "true"}
    fell = redis_client.xadd(tx_keys.results, fallback)
    redis_client.xadd(tx_keys.results, _result("true", "true", "true", rescreen_of=str(fell)))
    second = {**MODEL, "model": "m2", "prompt_version": "p2", "analyzer_role": "fallback"}
    for i in (10, 11):  # the second model, before the rules, catching what they miss
        redis_client.xadd(
            tx_keys.results, _result("true", "true", "false", txn_id=f"t-{i}", **second)
        )
    _shadow(redis_client, tx_keys)
    result = sentinel("status", "--json")
    doc: dict = result.json()  # type: ignore[assignment]
    model, fell_to, shadow = status_of_stream(doc, tx_keys.stream)["quality"]["models"]
    assert (model["role"], model["model"], model["prompt_version"]) == ("primary", "m1", "p1")
    assert (fell_to["role"], fell_to["model"], fell_to["tp"], fell_to["rules_recall"]) == (
        "fallback",
        "m2",
        2,
        0.0,
    )
    assert (shadow["role"], shadow["model"], shadow["labelled"]) == ("shadow", "s1", 6)
    assert (shadow["precision"], shadow["recall"]) == (1.0, 0.6667)
    assert (shadow["live_precision"], shadow["live_recall"]) == (0.6667, 0.6667)
    assert (shadow["rules_precision"], shadow["rules_recall"]) == (1.0, 0.6667)
    assert [model[c] for c in ("verdicts", "labelled", "tp", "fp", "tn", "fn")] == [
        8,
        7,
        3,
        1,
        2,
        1,
    ]
    assert (model["precision"], model["recall"]) == (0.75, 0.75)
    assert (model["rules_precision"], model["rules_recall"]) == (1.0, 0.75)
    text = sentinel("status").out
    expected = (
        "  quality (last 6 h): m1·p1 precision 0.75 recall 0.75 (rules 1.00/0.75) on 7 labelled;"
        " fallback m2·p2 precision 1.00 recall 1.00 (rules -/0.00) on 2 labelled;"
        " shadow s1·p9 precision 1.00 recall 0.67 (live 0.67/0.67, rules 1.00/0.67)"
        " on 6 labelled"
    )
    assert expected in text, text


def _shadow(redis_client: RedisClient, keys: StreamKeys) -> None:
    """s1 (prompt p9) on t-0..t-5: it catches t-0 and t-2, misses t-1 (asked twice: its
    newer verdict counts) and flags none of the harmless; its verdict on t-99 (no live
    decision) does not count."""
    labels = {0: True, 1: True, 2: True, 3: False, 4: False, 5: False, 99: True}

    def add(i: int, said: bool) -> None:
        txn = Transaction.model_validate({**BASE, "id": f"t-{i}", "is_threat": labels[i]})
        verdict = Assessment(said, "high" if said else "low", "n", "s1", "p9")
        entry: dict[Any, Any] = shadow_entry(txn, verdict)
        redis_client.xadd(shadow_results_key(keys), entry)

    add(1, True)
    for i, said in ((0, True), (1, False), (2, True), (3, False), (4, False), (5, False)):
        add(i, said)
    add(99, True)


def _row(**values: Any) -> dict[str, Any]:
    base = {
        "model": "m",
        "prompt_version": "v",
        "verdicts": 10,
        "labelled": 10,
        "precision": 0.5,
        "recall": 1.0,
        "rules_precision": None,
        "rules_recall": 0.25,
    }
    return {**base, **values}


@pytest.mark.parametrize(
    ("doc", "text"),
    [
        (None, None),
        ({"window_s": 21600, "models": []}, None),
        (
            {"window_s": 21600, "models": [_row(labelled=0)]},
            None,  # no truth: nothing to say
        ),
        (
            {"window_s": 3600, "models": [_row(), _row(model="n", labelled=0)]},
            "  quality (last 1 h): m·v precision 0.50 recall 1.00 (rules -/0.25) on 10 labelled",
        ),
        (
            {
                "window_s": 3600,
                "models": [
                    _row(role="fallback", labelled=4),
                    _row(role="shadow", live_precision=1.0, live_recall=None),
                ],
            },
            "  quality (last 1 h): fallback m·v precision 0.50 recall 1.00 (rules -/0.25) on 4"
            " labelled; shadow m·v precision 0.50 recall 1.00 (live 1.00/-, rules -/0.25)"
            " on 10 labelled",
        ),
    ],
)
def test_the_line(doc: dict[str, Any] | None, text: str | None) -> None:
    assert line(doc) == text


def test_only_model_verdicts_count_and_a_superseded_one_never() -> None:
    rows = [
        ("1-0", {"driver_used": "fallback", "label": "true", "is_threat": "false"}),
        ("2-0", {"driver_used": "rules", "label": "true", "is_threat": "false"}),
        ("3-0", {"driver_used": "analyzer", "model": "m", "label": "true", "is_threat": "false"}),
        (
            "4-0",
            {"driver_used": "analyzer", "model": "m", "is_threat": "true", "rescreen_of": "3-0"},
        ),
        ("5-0", {"driver_used": "analyzer", "model": "m", DEMO_FIELD: DEMO_VALUE, "label": "true"}),
    ]
    (model,) = summarise(rows)
    assert (model["verdicts"], model["labelled"], model["prompt_version"]) == (1, 0, "-")
    assert model["role"] == "primary", "an entry without analyzer_role is the primary's"


def test_roles_are_listed_primary_then_fallback_each_by_model() -> None:
    def said(i: int, model: str, role: str | None) -> tuple[str, dict[str, str]]:
        fields = {"driver_used": "analyzer", "model": model, "label": "true", "is_threat": "true"}
        return (f"{i}-0", fields if role is None else {**fields, "analyzer_role": role})

    rows = [said(1, "a", "fallback"), said(2, "z", None), said(3, "b", "primary")]
    assert [(r["role"], r["model"]) for r in summarise(rows)] == [
        ("primary", "b"),
        ("primary", "z"),
        ("fallback", "a"),
    ]


def test_a_shadow_counts_only_messages_with_a_live_decision_once_each() -> None:
    live = [
        ("9-0", {"driver_used": "analyzer", "txn_id": "t-1", "is_threat": "false",
                 "rules_is_threat": "true", "label": "true"}),
        ("8-0", {"driver_used": "fallback", "txn_id": "t-2", "is_threat": "false",
                 "rules_is_threat": "false", "label": "false"}),
    ]  # fmt: skip
    verdict = {"model": "s", "prompt_version": "v", "label": "true", "is_threat": "true"}
    shadow = [  # newest first, as read
        ("7-0", {**verdict, "shadow_of": "t-1"}),
        ("6-0", {**verdict, "shadow_of": "t-1", "is_threat": "false"}),  # older: not counted
        ("5-0", {**verdict, "shadow_of": "t-2", "label": "false", "is_threat": "false"}),
        ("4-0", {**verdict, "shadow_of": "t-3"}),  # no live decision
    ]
    (row,) = summarise_shadow(shadow, live)
    assert (row["role"], row["verdicts"], row["tp"], row["tn"], row["fn"]) == ("shadow", 2, 1, 1, 0)
    assert (row["recall"], row["live_recall"], row["rules_recall"]) == (1.0, 0.0, 1.0)
    assert row["agreement"] == 1.0
