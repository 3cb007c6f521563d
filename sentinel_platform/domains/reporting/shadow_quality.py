"""A model on trial beside the live one: the shadow's rows of the ``verdict_quality`` asset.

The shadow writes its verdicts to the stream's shadow result stream
(:func:`~sentinel_platform.streams.plumbing.keys.shadow_results_key`), each naming its
message (``shadow_of``: the message's natural key, a transaction's id, which the live
result entry carries as ``txn_id``), its data day and its truth (``label``). A shadow
row is one model and prompt version (role :data:`~.quality.SHADOW`, driver
``analyzer``) measured on exactly the messages it was asked about that also have a live
decision that day: its confusion matrix, the live decision's (``live_*``) and the
rules' (``rules_*``) on the same messages, and its agreement with the rules. A message
the shadow was asked about twice (a redelivery) counts once, by its newest verdict; a
shadow verdict whose message has no live decision in the day is left out, so the three
matrices are always of the same messages.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from sentinel_platform.domains.reporting.cost import data_day
from sentinel_platform.domains.reporting.decisions import decisions, with_supersession
from sentinel_platform.domains.reporting.quality import (
    NONE,
    SHADOW,
    TOKENS,
    cells,
    counted,
    flag_field,
    latency_percentiles,
)
from sentinel_platform.streams.backlog.recent_quality import SHADOW_OF
from sentinel_platform.verdict_quality import LABEL, LATENCY_MS, RULES_IS_THREAT


def shadow_rows(raw: DataFrame) -> DataFrame:
    """``raw`` (the shadow stream read back: ``stream_id``, ``fields``) as the columns
    the shadow's rows read, each entry with its data day."""
    fields = F.col("fields")
    return raw.select(
        "stream_id",
        data_day().alias("day"),
        fields.getItem(SHADOW_OF).alias(SHADOW_OF),
        F.coalesce(fields.getItem("model"), F.lit(NONE)).alias("_m"),
        F.coalesce(fields.getItem("prompt_version"), F.lit(NONE)).alias("_p"),
        flag_field("is_threat"),
        flag_field(LABEL),
        *[F.coalesce(fields.getItem(n).try_cast("long"), F.lit(0)).alias(n) for n in TOKENS],
        fields.getItem(LATENCY_MS).try_cast("double").alias(LATENCY_MS),
    )


def _newest(frame: DataFrame, *by: str) -> DataFrame:
    """One row per ``by``: the newest entry (the highest stream id's time and sequence)."""
    millis = F.split("stream_id", "-").getItem(0).cast("long")
    seq = F.split("stream_id", "-").getItem(1).cast("long")
    order = Window.partitionBy(*by).orderBy(millis.desc(), seq.desc())
    return frame.withColumn("_n", F.row_number().over(order)).where(F.col("_n") == 1).drop("_n")


def shadow_joined(shadow: DataFrame, verdicts: DataFrame, day: str) -> DataFrame:
    """``day``'s shadow verdicts (:func:`shadow_rows`), the newest per message, model and
    prompt version, on the messages with a live decision among ``verdicts``
    (:func:`~.quality.verdict_rows`), each with that decision (``_live``) and the rules'
    verdict on the message (``_rules``)."""
    of_day = with_supersession(verdicts.where(F.col("day") == F.lit(day)))
    live = _newest(decisions(of_day).where(F.col("txn_id").isNotNull()), "txn_id").select(
        F.col("txn_id").alias(SHADOW_OF),
        F.col("is_threat").alias("_live"),
        F.col(RULES_IS_THREAT).alias("_rules"),
    )
    asked = _newest(shadow.where(F.col("day") == F.lit(day)), SHADOW_OF, "_m", "_p")
    return asked.join(live, SHADOW_OF, "inner")


def shadow_counts(joined: DataFrame) -> list[dict[str, Any]]:
    """The counts of ``joined`` (:func:`shadow_joined`) per model and prompt version: the
    shadow's, the live decision's and the rules' confusion matrices against the label,
    agreements with the rules, tokens and latency percentiles (rows as
    :func:`~.quality.group_counts` gives them, plus ``live_*``)."""
    labelled = F.col(LABEL).isNotNull() & F.col("is_threat").isNotNull()
    compared = F.col("_rules").isNotNull() & F.col("is_threat").isNotNull()
    rows = (
        joined.groupBy("_m", "_p")
        .agg(
            F.count("*").alias("verdicts"),
            F.sum(labelled.cast("long")).alias("labelled"),
            *cells(LABEL, "is_threat"),
            *cells(LABEL, "_rules", "rules_"),
            *cells(LABEL, "_live", "live_"),
            F.sum((compared & (F.col("is_threat") == F.col("_rules"))).cast("long")).alias(
                "agreed"
            ),
            F.sum(compared.cast("long")).alias("compared"),
            *[F.sum(n).alias(n) for n in TOKENS],
            latency_percentiles().alias("_latency"),
        )
        .orderBy("_m", "_p")
        .collect()
    )
    return [counted({**row.asDict(), "_role": SHADOW, "_driver": "analyzer"}) for row in rows]
