"""Is a verdict right: verdicts set against the truth and against the rules, as counts.

A result entry of a labelled message carries its truth (``label``, "true"/"false",
:func:`~sentinel_platform.shown.truth_of`), the verdict (``is_threat``) and the rules'
verdict on the same message (``rules_is_threat``), so every figure an operator asks for
(is the model better than the rules it replaces, is the new prompt better than the old)
is a ratio of counts: :class:`Confusion` holds the four outcomes and the agreements,
and says precision, recall and F1. The quality asset, ``sentinel status`` and the
workers' Prometheus counter all count with :func:`outcome`, so the three agree.

A ratio with an empty denominator is None, never 0: "no threat flagged" is not "every
flag was wrong". Unlabelled verdicts count as verdicts and for agreement, never as
right or wrong.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

#: The result fields this module reads.
LABEL = "label"
RULES_IS_THREAT = "rules_is_threat"
RULES_RISK_LEVEL = "rules_risk_level"
LATENCY_MS = "latency_ms"
Outcome = Literal["tp", "fp", "tn", "fn"]
OUTCOMES: tuple[Outcome, ...] = ("tp", "fp", "tn", "fn")


def flag(value: str | None) -> bool | None:
    """A "true"/"false" field as a bool (any case); None when absent or anything else."""
    text = (value or "").strip().lower()
    return True if text == "true" else False if text == "false" else None


def outcome(label: bool | None, verdict: bool | None) -> Outcome | None:
    """The confusion-matrix cell of ``verdict`` against ``label``; None without both."""
    if label is None or verdict is None:
        return None
    if verdict:
        return "tp" if label else "fp"
    return "fn" if label else "tn"


def _ratio(part: int, whole: int, digits: int = 4) -> float | None:
    return round(part / whole, digits) if whole else None


@dataclass(frozen=True)
class Confusion:
    """Counts of one group of verdicts (a model and prompt version, or the rules)."""

    tp: int = 0
    fp: int = 0
    tn: int = 0
    fn: int = 0

    @property
    def labelled(self) -> int:
        return self.tp + self.fp + self.tn + self.fn

    @property
    def precision(self) -> float | None:
        """Of the verdicts that said threat, the share that were (None: none said so)."""
        return _ratio(self.tp, self.tp + self.fp)

    @property
    def recall(self) -> float | None:
        """Of the labelled threats, the share flagged (None: no threat was labelled)."""
        return _ratio(self.tp, self.tp + self.fn)

    @property
    def false_positive_rate(self) -> float | None:
        """Of the labelled harmless messages, the share flagged (None: none was labelled):
        the figure of a hard negative, where recall and precision say nothing."""
        return _ratio(self.fp, self.fp + self.tn)

    @property
    def f1(self) -> float | None:
        """The harmonic mean of precision and recall (None when either is, or both are 0)."""
        denominator = 2 * self.tp + self.fp + self.fn
        return _ratio(2 * self.tp, denominator) if self.tp else (0.0 if denominator else None)

    def add(self, cell: Outcome | None, amount: int = 1) -> Confusion:
        """These counts with ``amount`` more in ``cell`` (None: unchanged)."""
        if cell is None:
            return self
        counts = {name: getattr(self, name) for name in OUTCOMES}
        counts[cell] += amount
        return Confusion(**counts)

    def figures(self) -> dict[str, float | None]:
        return {"precision": self.precision, "recall": self.recall, "f1": self.f1}


def confusion_of(counts: Mapping[str, int]) -> Confusion:
    """A :class:`Confusion` from counts by cell name (missing cells count 0)."""
    return Confusion(**{name: int(counts.get(name) or 0) for name in OUTCOMES})


def agreement(agreed: int, compared: int) -> float | None:
    """The share of ``compared`` verdicts that said what the rules said."""
    return _ratio(agreed, compared)


def shortfalls(
    model: Confusion,
    rules: Confusion,
    min_recall: float | None = None,
    min_precision: float | None = None,
) -> list[str]:
    """Why ``model`` is worse than it should be, one sentence each (empty: it is not):
    its recall or precision below the rules' on the same messages (``rules``), or below
    the configured floors. A figure that cannot be computed is never a shortfall."""
    found: list[str] = []
    for name, floor in (("recall", min_recall), ("precision", min_precision)):
        mine, theirs = getattr(model, name), getattr(rules, name)
        if mine is None:
            continue
        if theirs is not None and mine < theirs:
            found.append(f"{name} {mine:.3f} below the rules' {theirs:.3f}")
        if floor is not None and mine < floor:
            found.append(f"{name} {mine:.3f} below the floor {floor:.3f}")
    return found


def percentile(values: list[float], share: float) -> float | None:
    """The nearest-rank ``share`` percentile (0-1) of ``values``; None when empty."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, math.ceil(share * len(ordered) - 1e-9))
    return ordered[min(rank, len(ordered)) - 1]
