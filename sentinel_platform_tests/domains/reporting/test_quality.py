"""The quality rows' pure logic: figures per role, the live columns of a shadow row, the
names the UI and the check give each row, and when a shadow is behind the live model."""

from __future__ import annotations

from typing import Any

import pytest

from sentinel_platform.domains.reporting.quality import (
    KEY,
    SCHEMA,
    figures,
    is_live_model,
    name_of,
)
from sentinel_platform.domains.reporting.quality_asset import behind_live, judged
from sentinel_platform.settings import Settings
from sentinel_platform.verdict_quality import Confusion


def _counts(role: str, driver: str, model: str, verdicts: int, **cells: int) -> dict[str, Any]:
    row: dict[str, Any] = {
        "role": role,
        "driver": driver,
        "model": model,
        "prompt_version": "p" if model != "-" else "-",
        "verdicts": verdicts,
        "labelled": sum(cells.get(n, 0) for n in ("tp", "fp", "tn", "fn")),
        "agreed": 0,
        "compared": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "cached_input_tokens": 0,
        "latency_p50_ms": None,
        "latency_p95_ms": None,
    }
    for name in ("tp", "fp", "tn", "fn"):
        row[name] = cells.get(name, 0)
        row[f"rules_{name}"] = cells.get(f"rules_{name}", 0)
        if "live_tp" in cells:
            row[f"live_{name}"] = cells.get(f"live_{name}", 0)
    return row


def test_the_role_follows_the_stream_and_the_live_columns_close_the_schema() -> None:
    names = [field.name for field in SCHEMA.fields]
    assert KEY == ("stream", "role", "driver", "model", "prompt_version")
    assert names[:5] == list(KEY)
    assert names[-7:] == [
        *("live_tp", "live_fp", "live_tn", "live_fn"),
        *("live_precision", "live_recall", "live_f1"),
    ]


def test_a_shadow_row_has_the_live_figures_and_no_share_of_the_fallbacks() -> None:
    counts = [
        _counts("primary", "analyzer", "m1", 6, tp=2, tn=4),
        _counts("-", "fallback", "-", 2, tn=2),
        _counts("shadow", "analyzer", "s1", 40, tp=1, fn=1, live_tp=2, live_fn=0),
    ]
    day = figures("transactions", counts, None)
    primary, _, shadow = day.rows
    assert day.fallback_share == 0.25, "2 of the 8 decisions; the shadow's 40 decide nothing"
    assert (shadow["recall"], shadow["live_recall"], shadow["live_tp"]) == (0.5, 1.0, 2)
    assert all(primary[c] is None for c in ("live_tp", "live_fn", "live_precision", "live_f1"))
    assert [field.name for field in SCHEMA.fields if field.name not in shadow] == []


@pytest.mark.parametrize(
    ("role", "driver", "name", "live"),
    [
        ("primary", "analyzer", "m · p", True),
        ("fallback", "analyzer", "fallback · m · p", True),
        ("shadow", "analyzer", "shadow · m · p", False),
    ],
)
def test_how_a_model_row_is_named(role: str, driver: str, name: str, live: bool) -> None:
    row = {"role": role, "driver": driver, "model": "m", "prompt_version": "p"}
    assert (name_of(row), is_live_model(row)) == (name, live)


@pytest.mark.parametrize(
    ("shadow", "live", "said"),
    [
        (Confusion(tp=4, fn=1), Confusion(tp=4, fn=1), []),
        (
            Confusion(tp=2, fn=2),
            Confusion(tp=3, fn=1),
            ["recall 0.500 below the live model's 0.750"],
        ),
        (
            Confusion(tp=1, fp=1, fn=1),
            Confusion(tp=2),
            [
                "recall 0.500 below the live model's 1.000",
                "precision 0.500 below the live model's 1.000",
            ],
        ),
        (Confusion(tn=3), Confusion(tp=1), []),  # the shadow flagged nothing: not computed
    ],
)
def test_when_a_shadow_is_behind_the_live_model(
    shadow: Confusion, live: Confusion, said: list[str]
) -> None:
    assert behind_live(shadow, live) == said


def test_the_check_names_a_shadow_behind_the_live_model_though_ahead_of_the_rules() -> None:
    counts = [
        _counts("primary", "analyzer", "m1", 4, tp=2, tn=2, rules_tp=1, rules_fn=1, rules_tn=2),
        _counts("shadow", "analyzer", "s1", 4, tp=1, fn=1, tn=2, rules_tp=1, rules_fn=1,
                rules_tn=2, live_tp=2, live_tn=2),
    ]  # fmt: skip
    check = judged(figures("transactions", counts, None), Settings())
    assert not check.passed
    assert check.metadata["shortfalls"].value == {
        "shadow · s1 · p": "recall 0.500 below the live model's 1.000"
    }
