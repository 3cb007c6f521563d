"""Verdict quality of one data day: each group of verdicts set against the truth and the
rules, as the rows of the ``verdict_quality`` asset.

A group is a stream, a role, a driver (``driver_used``) and, for a model's verdicts, its
model and prompt version, so a new prompt or a cheaper model is its own row. The role
says which analyzer decided: :data:`PRIMARY` or :data:`FALLBACK` (the result entry's
``analyzer_role``; an entry without one is the primary's), :data:`NONE` for the rules'
decisions, and :data:`SHADOW` for a model on trial, whose rows
(:mod:`~sentinel_platform.domains.reporting.shadow_quality`) also carry the live
decision's matrix on the same messages (the ``live_*`` columns, null on every other
row). Each message counts once, by its decision: a re-screen's model verdict
supersedes the provisional fallback it names
(:func:`~sentinel_platform.domains.reporting.decisions.decisions`).
Every entry of a labelled message carries the truth (``label``) and the rules' verdict
on the same message (``rules_is_threat``), so each row has its confusion matrix, the
rules' on the same messages beside it, and how often the two agreed; the figures are
computed from the counts by :mod:`sentinel_platform.verdict_quality`, the one place
that says what precision and recall are. Only the counts (groups x figures) reach the
driver.

A verdict decided by the rules (``rules``, ``fallback``) names no model: its group's
role, model and prompt version are :data:`NONE`. The ``fallback_share`` of every row is the
day's: the share of the stream's decisions that fell back to the rules (the shadow's
verdicts decide nothing and are not counted in it). A row's ``cost_per_verdict`` prices
the tokens of its verdicts decided in the batch lane (``lane=batch``) at the batch price
and the rest at the real-time price, as the cost report does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import DoubleType, LongType, StringType, StructField, StructType

from sentinel_platform.domains.reporting.cost import (
    BATCH,
    LANE,
    REALTIME,
    Prices,
    data_day,
    lane_cost,
)
from sentinel_platform.domains.reporting.decisions import decisions, with_supersession
from sentinel_platform.streams.backlog.provisional import RESCREEN_OF
from sentinel_platform.streams.backlog.recent_quality import ANALYZER_ROLE
from sentinel_platform.verdict_quality import (
    LABEL,
    LATENCY_MS,
    OUTCOMES,
    RULES_IS_THREAT,
    Confusion,
    agreement,
    confusion_of,
)

#: The model, prompt version and role of a verdict no model made.
NONE = "-"
RULES_DRIVERS = ("rules", "fallback")
#: The roles of a model's verdicts: the live analyzer, the second one before the rules,
#: and a model on trial that decides nothing.
PRIMARY, FALLBACK, SHADOW = "primary", "fallback", "shadow"
KEY = ("stream", "role", "driver", "model", "prompt_version")
#: The live decision's cells and figures on a shadow row's messages.
LIVE_COUNTS = tuple(f"live_{name}" for name in OUTCOMES)
LIVE_FIGURES = ("live_precision", "live_recall", "live_f1")
TOKENS = ("input_tokens", "output_tokens", "cached_input_tokens")
#: The counts of a group's tokens asked in the batch lane (a part of :data:`TOKENS`),
#: priced apart: not stored, only the cost per verdict they make.
BATCH_TOKENS = tuple(f"batch_{name}" for name in TOKENS)
#: The stored rows' columns, in order, with their Spark types.
SCHEMA = StructType(
    [
        *[StructField(name, StringType()) for name in KEY],
        *[
            StructField(name, LongType())
            for name in ("verdicts", "labelled", *OUTCOMES, "agreed", "compared", *TOKENS)
        ],
        *[
            StructField(name, DoubleType())
            for name in (
                "precision",
                "recall",
                "f1",
                "rules_precision",
                "rules_recall",
                "rules_f1",
                "agreement",
                "fallback_share",
                "tokens_per_verdict",
                "cost_per_verdict",
                "latency_p50_ms",
                "latency_p95_ms",
            )
        ],
        *[StructField(f"rules_{name}", LongType()) for name in OUTCOMES],
        *[StructField(name, LongType()) for name in LIVE_COUNTS],
        *[StructField(name, DoubleType()) for name in LIVE_FIGURES],
    ]
)


def flag_field(name: str) -> Column:
    """A "true"/"false" field as a boolean column, null when absent or anything else."""
    value = F.lower(F.trim(F.col("fields").getItem(name)))
    return F.when(value == "true", True).when(value == "false", False).alias(name)


def verdict_rows(raw: DataFrame) -> DataFrame:
    """``raw`` (a results stream read back: ``stream_id``, ``fields``) as the columns
    quality reads, each entry with its data day and its message's natural key (a
    transaction's id, ``txn_id``, which a shadow verdict names as ``shadow_of``)."""
    fields = F.col("fields")
    return raw.select(
        "stream_id",
        data_day().alias("day"),
        fields.getItem("txn_id").alias("txn_id"),
        fields.getItem("driver_used").alias("driver"),
        fields.getItem(ANALYZER_ROLE).alias(ANALYZER_ROLE),
        fields.getItem("model").alias("model"),
        fields.getItem("prompt_version").alias("prompt_version"),
        fields.getItem(RESCREEN_OF).alias(RESCREEN_OF),
        flag_field("is_threat"),
        flag_field(LABEL),
        flag_field(RULES_IS_THREAT),
        *[F.coalesce(fields.getItem(n).try_cast("long"), F.lit(0)).alias(n) for n in TOKENS],
        fields.getItem(LATENCY_MS).try_cast("double").alias(LATENCY_MS),
        F.coalesce(fields.getItem(LANE), F.lit(REALTIME)).alias(LANE),
    )


def cells(truth: str, verdict: str, prefix: str = "") -> list[Column]:
    """The four confusion cells of ``verdict`` against ``truth`` as summed columns."""
    said, was = F.col(verdict), F.col(truth)
    cells = {"tp": said & was, "fp": said & ~was, "tn": ~said & ~was, "fn": ~said & was}
    return [
        F.sum(F.coalesce(cells[name], F.lit(False)).cast("long")).alias(prefix + name)
        for name in OUTCOMES
    ]


def keyed_decisions(verdicts: DataFrame, day: str) -> DataFrame:
    """``day``'s decisions among ``verdicts`` (:func:`verdict_rows`), each with its
    group: ``_role``, ``_driver``, ``_m`` (model) and ``_p`` (prompt version), all
    :data:`NONE` but the driver for a rules decision."""
    of_day = with_supersession(verdicts.where(F.col("day") == F.lit(day)))
    by_rules = F.col("driver").isin(*RULES_DRIVERS)
    return decisions(of_day).select(
        "*",
        F.coalesce("driver", F.lit(NONE)).alias("_driver"),
        F.when(by_rules, F.lit(NONE))
        .otherwise(F.coalesce(ANALYZER_ROLE, F.lit(PRIMARY)))
        .alias("_role"),
        F.when(by_rules, F.lit(NONE)).otherwise(F.coalesce("model", F.lit(NONE))).alias("_m"),
        F.when(by_rules, F.lit(NONE))
        .otherwise(F.coalesce("prompt_version", F.lit(NONE)))
        .alias("_p"),
    )


def group_counts(verdicts: DataFrame, day: str) -> list[dict[str, Any]]:
    """The counts of ``day``'s decisions among ``verdicts`` (:func:`verdict_rows`) per
    role, driver, model and prompt version: verdicts, labelled ones, the confusion matrix
    of the verdict and of the rules against the label, agreements with the rules, tokens
    and latency percentiles."""
    labelled = F.col(LABEL).isNotNull() & F.col("is_threat").isNotNull()
    compared = F.col(RULES_IS_THREAT).isNotNull() & F.col("is_threat").isNotNull()
    rows = (
        keyed_decisions(verdicts, day)
        .groupBy("_role", "_driver", "_m", "_p")
        .agg(
            F.count("*").alias("verdicts"),
            F.sum(labelled.cast("long")).alias("labelled"),
            *cells(LABEL, "is_threat"),
            *cells(LABEL, RULES_IS_THREAT, "rules_"),
            F.sum((compared & (F.col("is_threat") == F.col(RULES_IS_THREAT))).cast("long")).alias(
                "agreed"
            ),
            F.sum(compared.cast("long")).alias("compared"),
            *[F.sum(n).alias(n) for n in TOKENS],
            *batch_sums(),
            latency_percentiles().alias("_latency"),
        )
        .orderBy("_role", "_driver", "_m", "_p")
        .collect()
    )
    return [counted(row.asDict()) for row in rows]


def batch_sums() -> list[Column]:
    """The :data:`BATCH_TOKENS`: the group's tokens of verdicts asked in the batch lane."""
    batch = F.col(LANE) == F.lit(BATCH)
    return [F.sum(F.when(batch, F.col(n)).otherwise(F.lit(0))).alias(f"batch_{n}") for n in TOKENS]


def priced(row: dict[str, Any], prices: Prices | None) -> float | None:
    """What ``row``'s tokens cost, each lane's at its price (:func:`lane_cost`): the
    batch lane's :data:`BATCH_TOKENS` apart from the rest, which were asked in real time
    (a row without them, a shadow's, was all real time). None: no prices."""
    batch = [int(row.get(name) or 0) for name in BATCH_TOKENS]
    realtime = [int(row[name]) - spent for name, spent in zip(TOKENS, batch, strict=True)]
    now = lane_cost(realtime[0], realtime[1], realtime[2], REALTIME, prices)
    later = lane_cost(batch[0], batch[1], batch[2], BATCH, prices)
    return None if now is None or later is None else now + later


def latency_percentiles() -> Column:
    """The p50 and p95 of the group's ``latency_ms`` (an array of two)."""
    return F.percentile_approx(LATENCY_MS, F.array(F.lit(0.5), F.lit(0.95)), 10_000)


def counted(row: dict[str, Any]) -> dict[str, Any]:
    """A collected group (``_role``, ``_driver``, ``_m``, ``_p``, ``_latency`` and the
    counts) as a row of counts; a count of none (an empty sum) is 0."""
    latency = row.pop("_latency") or [None, None]
    counts: dict[str, Any] = {
        "role": row.pop("_role"),
        "driver": row.pop("_driver"),
        "model": row.pop("_m"),
        "prompt_version": row.pop("_p"),
        **{name: int(value or 0) for name, value in row.items()},
    }
    counts["latency_p50_ms"], counts["latency_p95_ms"] = latency
    return counts


@dataclass(frozen=True)
class DayQuality:
    """A day's rows (:data:`SCHEMA`'s columns) and the stream's share of fallbacks."""

    rows: list[dict[str, Any]]
    fallback_share: float | None


def figures(stream: str, counts: list[dict[str, Any]], prices: Prices | None) -> DayQuality:
    """The rows of ``counts`` (:func:`group_counts`, and the shadow's) with their
    figures: precision, recall and F1 of the verdicts, of the rules and (a shadow row)
    of the live decisions on the same messages, agreement, the day's fallback share,
    tokens and cost per verdict, each lane's tokens at its price (:func:`priced`; no
    prices: no cost)."""
    decided = [row for row in counts if row["role"] != SHADOW]
    total = sum(row["verdicts"] for row in decided)
    fell = sum(row["verdicts"] for row in decided if row["driver"] == "fallback")
    share = agreement(fell, total)
    rows = []
    for row in counts:
        mine = confusion_of(row)
        rules = confusion_of({name: row[f"rules_{name}"] for name in OUTCOMES})
        live = live_of(row)
        billed = priced(row, prices)
        tokens = row["input_tokens"] + row["output_tokens"]
        per = row["verdicts"] or 1
        rows.append(
            {
                **row,
                "stream": stream,
                **mine.figures(),
                **{f"rules_{name}": value for name, value in rules.figures().items()},
                **{name: row.get(name) for name in LIVE_COUNTS},
                **dict.fromkeys(LIVE_FIGURES),
                **({} if live is None else {f"live_{k}": v for k, v in live.figures().items()}),
                "agreement": agreement(row["agreed"], row["compared"]),
                "fallback_share": share,
                "tokens_per_verdict": round(tokens / per, 2),
                "cost_per_verdict": None if billed is None else round(billed / per, 8),
            }
        )
    return DayQuality(rows, share)


def live_of(row: dict[str, Any]) -> Confusion | None:
    """The live decisions' matrix on a shadow row's messages; None on any other row."""
    if row.get(LIVE_COUNTS[0]) is None:
        return None
    return confusion_of({name: row[f"live_{name}"] for name in OUTCOMES})


def is_model(row: dict[str, Any]) -> bool:
    """Whether ``row`` is a group of a model's verdicts (not the rules deciding), the
    shadow's included."""
    return row["driver"] not in RULES_DRIVERS and row["driver"] != NONE


def is_live_model(row: dict[str, Any]) -> bool:
    """Whether ``row`` is a group of a model's decisions (primary or fallback)."""
    return is_model(row) and row["role"] != SHADOW


def name_of(row: dict[str, Any]) -> str:
    """How the UI names a model's row: ``<model> · <prompt version>`` for the primary
    (the name its plots have always had), the role first for any other."""
    name = f"{row['model']} · {row['prompt_version']}"
    return name if row["role"] == PRIMARY else f"{row['role']} · {name}"
