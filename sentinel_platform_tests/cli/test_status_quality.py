"""``sentinel status`` (the real command, a subprocess) measures the last hours' model
verdicts against the truth and the rules, per model and prompt version, from result
entries written in the contract's shape; the summary and the line from tables of cases."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from sentinel_platform.cli.status_quality import line
from sentinel_platform.schemas import DEMO_FIELD, DEMO_VALUE
from sentinel_platform.streams.backlog.recent_quality import summarise
from sentinel_platform.streams.plumbing.connection import RedisClient
from sentinel_platform.streams.plumbing.keys import StreamKeys
from sentinel_platform_tests.harness.cli import CliResult, status_of_stream, transaction_result

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
    for label, said, rules in rows:
        redis_client.xadd(tx_keys.results, _result(label, said, rules))
    fallback: dict[Any, Any] = {**transaction_result("fallback"), "label": "true"}
    fell = redis_client.xadd(tx_keys.results, fallback)
    redis_client.xadd(tx_keys.results, _result("true", "true", "true", rescreen_of=str(fell)))
    result = sentinel("status", "--json")
    doc: dict = result.json()  # type: ignore[assignment]
    (model,) = status_of_stream(doc, tx_keys.stream)["quality"]["models"]
    assert (model["model"], model["prompt_version"]) == ("m1", "p1")
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
        "  quality (last 6 h): m1·p1 precision 0.75 recall 0.75 (rules 1.00/0.75) on 7 labelled"
    )
    assert expected in text, text


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
