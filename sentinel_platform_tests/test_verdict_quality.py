"""The quality figures from counts, from tables of cases."""

from __future__ import annotations

import pytest

from sentinel_platform.verdict_quality import (
    Confusion,
    Outcome,
    agreement,
    confusion_of,
    flag,
    outcome,
    percentile,
    shortfalls,
)


@pytest.mark.parametrize(
    ("label", "verdict", "cell"),
    [
        (True, True, "tp"),
        (False, True, "fp"),
        (False, False, "tn"),
        (True, False, "fn"),
        (None, True, None),  # no truth: never right or wrong
        (True, None, None),
    ],
)
def test_outcome_is_the_cell_of_the_verdict_against_the_label(
    label: bool | None, verdict: bool | None, cell: Outcome | None
) -> None:
    assert outcome(label, verdict) == cell


@pytest.mark.parametrize(
    ("text", "value"),
    [("true", True), ("FALSE", False), (" True ", True), ("", None), (None, None), ("1", None)],
)
def test_flag_reads_only_true_and_false(text: str | None, value: bool | None) -> None:
    assert flag(text) == value


@pytest.mark.parametrize(
    ("counts", "precision", "recall", "f1"),
    [
        (Confusion(tp=8, fp=2, tn=85, fn=5), 0.8, 0.6154, 0.6957),
        (Confusion(tp=3, fp=0, tn=10, fn=0), 1.0, 1.0, 1.0),
        # never said threat: precision unknown, recall 0, F1 0
        (Confusion(tp=0, fp=0, tn=10, fn=4), None, 0.0, 0.0),
        # no threat labelled, none flagged: nothing to say
        (Confusion(tn=10), None, None, None),
        # only false alarms
        (Confusion(fp=3, tn=7), 0.0, None, 0.0),
        (Confusion(), None, None, None),
    ],
)
def test_precision_recall_f1_from_counts(
    counts: Confusion, precision: float | None, recall: float | None, f1: float | None
) -> None:
    assert counts.figures() == {"precision": precision, "recall": recall, "f1": f1}


@pytest.mark.parametrize(
    ("counts", "rate"),
    [
        (Confusion(tp=8, fp=2, tn=85, fn=5), 0.023),
        (Confusion(fp=3, tn=7), 0.3),
        (Confusion(fp=4), 1.0),
        (Confusion(tn=10), 0.0),
        # only threats labelled: no harmless message to flag wrongly
        (Confusion(tp=3, fn=1), None),
    ],
)
def test_false_positive_rate_is_the_share_of_harmless_flagged(
    counts: Confusion, rate: float | None
) -> None:
    assert counts.false_positive_rate == (None if rate is None else pytest.approx(rate, abs=1e-4))


def test_counts_add_up_cell_by_cell() -> None:
    counts = Confusion().add("tp").add("tp").add("fn", 3).add(None)
    assert counts == confusion_of({"tp": 2, "fn": 3}) and counts.labelled == 5


@pytest.mark.parametrize(
    ("agreed", "compared", "share"), [(9, 10, 0.9), (0, 4, 0.0), (0, 0, None), (2, 3, 0.6667)]
)
def test_agreement_is_a_share_or_none(agreed: int, compared: int, share: float | None) -> None:
    assert agreement(agreed, compared) == share


RULES = Confusion(tp=6, fp=4, tn=86, fn=4)  # precision 0.6, recall 0.6


@pytest.mark.parametrize(
    ("model", "min_recall", "min_precision", "found"),
    [
        (Confusion(tp=8, fp=2, tn=88, fn=2), None, None, []),
        (
            Confusion(tp=4, fp=1, tn=89, fn=6),
            None,
            None,
            ["recall 0.400 below the rules' 0.600"],
        ),
        (
            Confusion(tp=8, fp=8, tn=82, fn=2),
            None,
            None,
            ["precision 0.500 below the rules' 0.600"],
        ),
        (
            Confusion(tp=8, fp=2, tn=88, fn=2),
            0.9,
            0.7,
            ["recall 0.800 below the floor 0.900"],
        ),
        # never said threat: its precision is unknown, not a shortfall; recall 0 is
        (
            Confusion(tn=90, fn=10),
            None,
            0.5,
            ["recall 0.000 below the rules' 0.600"],
        ),
    ],
)
def test_shortfalls_name_what_is_below_the_rules_or_the_floor(
    model: Confusion, min_recall: float | None, min_precision: float | None, found: list[str]
) -> None:
    assert shortfalls(model, RULES, min_recall, min_precision) == found


def test_a_model_is_not_worse_than_rules_that_cannot_be_measured() -> None:
    assert shortfalls(Confusion(tp=1, fp=1, tn=5), Confusion(tn=7)) == []


@pytest.mark.parametrize(
    ("values", "share", "value"),
    [
        ([], 0.5, None),
        ([40.0], 0.95, 40.0),
        ([10.0, 30.0, 20.0, 40.0], 0.5, 20.0),
        ([float(v) for v in range(1, 101)], 0.95, 95.0),
        ([float(v) for v in range(1, 101)], 0.5, 50.0),
    ],
)
def test_percentile_is_nearest_rank(values: list[float], share: float, value: float | None) -> None:
    assert percentile(values, share) == value
