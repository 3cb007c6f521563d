"""Who decided each message, and which of its verdicts is its decision, for the read-backs.

A result entry says who made it (``driver_used``: rules, analyzer, fallback), why the
rules decided when they did (``fallback_cause``), whether it waits for the model
(``provisional``), and, for a model verdict made by re-screening, which provisional
verdict it supersedes (``rescreen_of``, that entry's id). Both entries stay in the result
stream (:mod:`sentinel_platform.streams.backlog.provisional`), and so both stay in the
read-back, because an auditor asks what was decided first as well as what stands; the
superseded one is marked (``superseded_by``: the superseding entry's id) and every count
of decisions (the report's threats and risk levels, the read-backs' ``decisions``) takes
only the entries nobody superseded: a message's newest model verdict, or its one verdict.

The read-backs keep what says *why*: the narrative, the model and prompt version, the
tokens, and the data's ``day``. The transactions read-back also shows the newest days'
threats with their narratives as a table in the Dagster UI (:func:`threats_table`).
"""

from __future__ import annotations

from typing import Any

import dagster as dg
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from sentinel_platform.streams.backlog.provisional import DAY, FALLBACK_CAUSE, RESCREEN_OF

#: String fields of every stream's result entries that say who decided and why.
PROVENANCE_FIELDS = (
    "driver_used",
    FALLBACK_CAUSE,
    "model",
    "prompt_version",
    RESCREEN_OF,
    DAY,
    "source_message_id",
)
TOKEN_FIELDS = ("input_tokens", "output_tokens", "cached_input_tokens")
#: Column: the id of the entry that superseded this one (null: it is the decision).
SUPERSEDED_BY = "superseded_by"
#: At most this many threats are shown in the UI (the count covers them all).
THREAT_ROWS = 50
#: A narrative longer than this is cut (with an ellipsis) in the UI's table.
NARRATIVE_CHARS = 200
#: The threats' fields: ``by`` is the model of a model's verdict, else ``driver_used``
#: (rules, fallback).
THREAT_COLUMNS = ("day", "txn_id", "by", "narrative")
#: The threats table's first column in the UI: the transaction, its day and who decided,
#: in one cell that wraps, so that the table (this and the narrative) fits its cell.
THREAT_NAME = "txn_id · day · by"


def _field(name: str, cast: str | None = None) -> Column:
    column = F.col("fields").getItem(name)
    return (column.try_cast(cast) if cast else column).alias(name)


def provenance_columns() -> list[Column]:
    """Who decided an entry and why: :data:`PROVENANCE_FIELDS`, the tokens (longs) and
    ``provisional`` (a boolean, false when absent)."""
    provisional = F.lower(F.col("fields").getItem("provisional")) == F.lit("true")
    return [
        *[_field(n) for n in PROVENANCE_FIELDS],
        *[_field(n, "long") for n in TOKEN_FIELDS],
        F.coalesce(provisional, F.lit(False)).alias("provisional"),
    ]


def with_supersession(verdicts: DataFrame) -> DataFrame:
    """``verdicts`` (with ``stream_id`` and ``rescreen_of``) plus :data:`SUPERSEDED_BY`:
    the newest entry whose ``rescreen_of`` names this one, else null."""
    superseding = (
        verdicts.where(F.col(RESCREEN_OF).isNotNull())
        .groupBy(F.col(RESCREEN_OF).alias("_superseded"))
        .agg(F.max("stream_id").alias(SUPERSEDED_BY))
    )
    joined = verdicts.join(superseding, verdicts["stream_id"] == superseding["_superseded"], "left")
    return joined.drop("_superseded")


def decisions(verdicts: DataFrame) -> DataFrame:
    """The entries that stand: those no re-screen superseded (one per message)."""
    return verdicts.where(F.col(SUPERSEDED_BY).isNull())


def decision_counts(verdicts: DataFrame) -> dict[str, dg.MetadataValue]:
    """A read-back's counts: its ``decisions`` (one per message), the ``superseded``
    entries kept beside them, and the decisions still ``provisional``."""
    stands = F.col(SUPERSEDED_BY).isNull()
    row = verdicts.agg(
        F.sum(stands.cast("long")).alias("decisions"),
        F.sum((~stands).cast("long")).alias("superseded"),
        F.sum((stands & F.col("provisional")).cast("long")).alias("provisional"),
    ).first()
    values = row.asDict() if row is not None else {}
    return {
        name: dg.MetadataValue.int(int(values.get(name) or 0))
        for name in ("decisions", "superseded", "provisional")
    }


def short(text: Any, limit: int = NARRATIVE_CHARS) -> str:
    """``text`` as one table cell: empty for none, cut at ``limit`` characters with an
    ellipsis."""
    if text is None:
        return ""
    value = str(text)
    return value if len(value) <= limit else value[: limit - 1].rstrip() + "…"


def threats_table(verdicts: DataFrame) -> dg.TableMetadataValue:
    """The threats among the decisions of ``verdicts`` (the transactions read-back), the
    newest data days first, at most :data:`THREAT_ROWS`, each with who decided and the
    narrative that says why (cut at :data:`NARRATIVE_CHARS`)."""
    model = F.when(F.col("driver_used") == F.lit("analyzer"), F.col("model"))
    by = F.coalesce(model, F.col("driver_used")).alias("by")
    rows = (
        decisions(verdicts)
        .where(F.col("is_threat"))
        .orderBy(F.desc_nulls_last("day"), F.desc("stream_id"))
        .select("day", "txn_id", by, "narrative")
        .limit(THREAT_ROWS)
        .collect()
    )
    records = [
        dg.TableRecord(
            {
                THREAT_NAME: " · ".join(str(row[n]) for n in ("txn_id", "day", "by")),
                **{n: short(row[n]) for n in THREAT_COLUMNS},
            }
        )
        for row in rows
    ]
    columns = [dg.TableColumn(THREAT_NAME, "string"), dg.TableColumn("narrative", "string")]
    return dg.MetadataValue.table(records, schema=dg.TableSchema(columns=columns))
