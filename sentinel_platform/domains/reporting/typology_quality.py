"""Which typologies a model misses: the day's verdicts per role, model, prompt version and
the generated row's ``typology``, for the ``verdict_quality`` asset's metadata.

The typology of a generated transaction is in the day's ``enriched_transactions``
partition only (never on the wire, so never on a result entry). That partition's key is
the data day, as the quality asset's is, so the day's decisions and the shadow's
verdicts are joined to it by transaction id (the Parquet's ``id``, the result's
``txn_id``, the shadow's ``shadow_of``). Each row counts the messages of one typology a
group decided (or, the shadow, was asked about), how many its verdict flagged and how
many the rules flagged: ``structuring`` flagged by the rules and not by a model is a
model's miss, ``scam_story`` the other way round. A day without the partition, or one
landed from files (no ``typology`` column), has no breakdown.
"""

from __future__ import annotations

from typing import Any

import dagster as dg
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from sentinel_platform.domains.reporting.quality import SHADOW
from sentinel_platform.domains.reporting.shadow_quality import SHADOW_OF
from sentinel_platform.verdict_quality import RULES_IS_THREAT

TYPOLOGY = "typology"
#: The breakdown's columns, in order: the group, the typology and its three counts.
COLUMNS = (
    ("role", "string"),
    ("model", "string"),
    ("prompt_version", "string"),
    (TYPOLOGY, "string"),
    ("messages", "int"),
    ("flagged", "int"),
    ("rules_flagged", "int"),
)


def typologies_of(enriched: DataFrame | None) -> DataFrame | None:
    """``(txn_id, typology)`` of the day's enriched transactions; None without them or
    without a ``typology`` column (a landed day)."""
    if enriched is None or TYPOLOGY not in enriched.columns:
        return None
    return enriched.select(F.col("id").alias("txn_id"), TYPOLOGY).dropDuplicates(["txn_id"])


def _count(flag: str) -> Any:
    return F.sum(F.coalesce(F.col(flag), F.lit(False)).cast("long"))


def typology_counts(
    decided: DataFrame, shadow: DataFrame, typologies: DataFrame
) -> list[dict[str, Any]]:
    """Per role, model, prompt version and typology (sorted): the ``messages``, those the
    verdict ``flagged`` and those the rules flagged (``rules_flagged``), among the day's
    keyed decisions (:func:`~.quality.keyed_decisions`) and the shadow's verdicts on the
    same messages (:func:`~.shadow_quality.shadow_joined`)."""
    names = (F.col("_m").alias("model"), F.col("_p").alias("prompt_version"))
    live = decided.select(
        F.col("_role").alias("role"),
        *names,
        "txn_id",
        F.col("is_threat").alias("said"),
        F.col(RULES_IS_THREAT).alias("rules"),
    )
    trial = shadow.select(
        F.lit(SHADOW).alias("role"),
        *names,
        F.col(SHADOW_OF).alias("txn_id"),
        F.col("is_threat").alias("said"),
        F.col("_rules").alias("rules"),
    )
    key = ("role", "model", "prompt_version", TYPOLOGY)
    rows = (
        live.unionByName(trial)
        .join(typologies, "txn_id", "inner")
        .groupBy(*key)
        .agg(
            F.count("*").alias("messages"),
            _count("said").alias("flagged"),
            _count("rules").alias("rules_flagged"),
        )
        .orderBy(*key)
        .collect()
    )
    return [row.asDict() for row in rows]


def typology_table(rows: list[dict[str, Any]]) -> dg.TableMetadataValue:
    """``rows`` (:func:`typology_counts`) as the UI's table."""
    columns = [dg.TableColumn(name, kind) for name, kind in COLUMNS]
    records = [dg.TableRecord({name: row[name] for name, _ in COLUMNS}) for row in rows]
    return dg.MetadataValue.table(records, schema=dg.TableSchema(columns=columns))
